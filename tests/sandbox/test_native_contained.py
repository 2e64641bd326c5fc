"""A contained family through native shims: a rare path's hand-over to the sh shim runs its
interpreter, which the containment allows (the sh shim's #!), so the exec is recorded and
runs as it would through the sh shim."""

from __future__ import annotations

import os
from pathlib import Path

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.sandbox.contained import build
from mcpshim.shim import install as shim_install
from tests.fixtures.home import Home
from tests.fixtures.landlockhelp import needs_landlock
from tests.fixtures.nativekit import need_cc

TRUE = os.path.realpath("/bin/true")


@needs_landlock
def test_a_native_shim_s_sh_fallback_runs_in_a_contained_family(home: Home, tmp_path: Path) -> None:
    need_cc()
    shim_install.install(home.loc, ["t"], {"t": TRUE}, native_mode="require")
    tool = ToolApproval("run", "sha", boundary=Boundary((Executable(TRUE),)))
    server = ServerApproval("srv", program=Executable(TRUE), tools={"run": tool})
    shim = str(home.loc.shim_dir / "t")
    for args in (["plain"], ["--password=hunter2"]):  # the common path, then the scrubber's
        c = build(server, "L", 7, home.loc, None, "/usr/bin:/bin", None, TRUE)
        r, w = os.pipe()
        pid = c.spawn(shim, ["t", *args], {"PATH": "/usr/bin:/bin"}, [(os.POSIX_SPAWN_DUP2, w, 2)])
        os.close(w)
        err = b""
        while chunk := os.read(r, 4096):
            err += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, err
        assert err == b""
    recs = home.execs()
    assert [r.args for r in recs] == [(b"plain",), (b"--password=[REDACTED:option-value]",)]
