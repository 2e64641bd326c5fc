"""A traced session through native shims: the hand-over to the sh shim is a shim hop, and
the target is still the shim's (not an exec no shim took part in)."""

from __future__ import annotations

import shutil

import pytest

from mcpshim.family.tree import build_forest, images
from mcpshim.shim import install as shim_install
from tests.fixtures.home import Home
from tests.fixtures.nativekit import need_cc
from tests.fixtures.runhelp import events, needs_trace, only_session, run

GIT = shutil.which("git", path="/usr/bin:/bin")


@needs_trace
@pytest.mark.skipif(GIT is None, reason="needs git")
def test_a_native_shim_and_its_fallback_in_a_trace(home: Home) -> None:
    need_cc()
    res = shim_install.install(home.loc, ["git"], {}, native_mode="require")
    assert [e.kind for e in res.installed] == ["native"]
    # the shell's first shimmed child goes through the sh shim (parent evidence), the second
    # is the native shim's own
    line = "git --version; git --version"
    proc = run(home, ["/bin/sh", "-c", line], "--trace", capture_output=True)
    assert proc.returncode == 0, proc.stderr
    sid = only_session(home)
    traced = events(home, "trace-exec", sid)  # (less the helper reading the shell's argv)
    ok = [r for r in traced if r["result"] == "ok" and not r.get("shim_helper")]
    shim_path = str(home.loc.shim_dir / "git")
    by_pid: dict[int, list[dict[str, object]]] = {}
    for r in ok[1:]:
        by_pid.setdefault(int(str(r["pid"])), []).append(r)
    chains = sorted(by_pid.values(), key=len)
    assert [len(c) for c in chains] == [2, 3]
    plain, handed = chains
    assert plain[0]["filename"] == shim_path and plain[0]["shim_script"] is True
    assert plain[1]["via_shim"] == "git"
    assert handed[0]["filename"] == shim_path and handed[0]["shim_script"] is True
    assert handed[1]["shim_script"] is True  # the interpreter sourcing the sh shim
    assert handed[2]["via_shim"] == "git" and handed[2]["filename"] == GIT
    recs = home.execs()
    assert len(recs) == 2 and all(r.invoked_as == shim_path.encode() for r in recs)
    assert [bool(r.parent_cmdline) for r in recs].count(True) == 1
    forest = build_forest(images(home.records(), sid))
    for rec in recs:
        node = next(n for r in forest.roots for n in r.walk() if n.pid == rec.pid)
        # the model's one entry for the exec is the shim's (the fallback hop adds none)
        assert [i.source for i in node.images if i.entry] == ["shim"]
