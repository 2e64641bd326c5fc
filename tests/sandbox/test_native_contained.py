"""A contained family through native shims (issue 39 item 2): a native shim needs no
interpreter, so the containment allows none the lock did not approve. A rare path's
hand-over to the sh shim then fails closed (126, nothing runs unlogged) and the start line
says so; under a lock that approves the shims' interpreter it runs and is recorded as it
would be through the sh shim."""

from __future__ import annotations

import os
from pathlib import Path

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.sandbox.contained import build
from mcpshim.shim import install as shim_install
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home
from tests.fixtures.landlockhelp import needs_landlock
from tests.fixtures.nativekit import need_cc

TRUE = os.path.realpath("/bin/true")


def _spawn(home: Home, server: ServerApproval, args: list[str]) -> tuple[int, bytes, str]:
    c = build(server, "L", 7, home.loc, None, "/usr/bin:/bin", None, TRUE)
    r, w = os.pipe()
    shim = str(home.loc.shim_dir / "t")
    pid = c.spawn(shim, ["t", *args], {"PATH": "/usr/bin:/bin"}, [(os.POSIX_SPAWN_DUP2, w, 2)])
    os.close(w)
    err = b""
    while chunk := os.read(r, 4096):
        err += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err, c.plan.summary(7)


@needs_landlock
def test_a_native_shims_sh_fallback_needs_a_shell_the_lock_approved(
    home: Home, tmp_path: Path
) -> None:
    need_cc()
    shim_install.install(home.loc, ["t"], {"t": TRUE}, native_mode="require")
    manifest = load_manifest(home.loc.shim_dir)
    assert manifest is not None
    shell = manifest.interpreter
    for approved, want in (((TRUE,), 126), ((TRUE, shell), 0)):
        tool = ToolApproval("run", "sha", boundary=Boundary(tuple(map(Executable, approved))))
        server = ServerApproval("srv", program=Executable(TRUE), tools={"run": tool})
        status, err, line = _spawn(home, server, ["plain"])  # the common path: no shell
        assert (status, err) == (0, b"")
        status, err, line = _spawn(home, server, ["--password=hunter2"])  # the scrubber's
        assert status == want, err
        if want:
            assert err == f"mcpshim: cannot run {shell}: Permission denied\n".encode()
            assert "the native shims' sh fallback cannot run" in line
            assert f"{shell} (" not in line.split("; write:")[0]  # not executable
        else:
            assert err == b"" and "fallback cannot run" not in line
    recs = home.execs()
    assert [r.args for r in recs] == [
        (b"plain",),
        (b"plain",),
        (b"--password=[REDACTED:option-value]",),
    ]
