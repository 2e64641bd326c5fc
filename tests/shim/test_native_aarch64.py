"""The native shim built for aarch64 (a cross compiler) and run under qemu-user writes the
same record as the x86_64 one: the raw system calls, the entry and the self-relocation of
the other architecture hold. Skips where Debian's gcc-aarch64-linux-gnu and qemu-user are
not installed (CI does not need them)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from mcpshim.shim import native, native_install, targets
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.nativekit import log_size, make_pair, masked, need_cc, raw_records, run

CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")
TRUE = shutil.which("true") or "/bin/true"


@pytest.mark.skipif(not (CROSS and QEMU), reason="needs gcc-aarch64-linux-gnu and qemu-user")
@pytest.mark.skipif(platform.machine() != "x86_64", reason="cross-checks from x86_64")
def test_the_aarch64_build_writes_the_same_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_cc()
    assert CROSS and QEMU
    pair = make_pair(tmp_path, {"true": TRUE})
    m = load_manifest(pair.nat.loc.shim_dir)
    assert m is not None
    cfg = native_install.config_for(
        "true", TRUE, str(pair.nat.loc.log_dir), "run", m.interpreter, False,
        targets.known_shells(), pair.nat.loc.shim_dir,
    )  # fmt: skip
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    binary = native.build(native.render_config(cfg), [CROSS])
    assert binary[18:20] == (183).to_bytes(2, "little")
    a64 = tmp_path / "a64" / "true"
    a64.parent.mkdir()
    a64.write_bytes(binary)
    a64.chmod(0o755)
    # the same exec: x86_64 native, then aarch64 under qemu (from a Python parent: the
    # common path), through one link so $0 is the same
    link = pair.link("true", "native")
    args = [b"a", b"two words", b"x\ny", b"\xff"]
    size = log_size(pair.nat)
    assert run([link, *args], {"PATH": "/usr/bin:/bin"}).returncode == 0
    [(f1, r1)] = raw_records(pair.nat, size)
    tmp_link = link.with_name("true.new")
    tmp_link.symlink_to(a64)
    os.replace(tmp_link, link)
    size = log_size(pair.nat)
    done = subprocess.run(
        [QEMU, str(link), *args], env={"PATH": "/usr/bin:/bin"}, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    [(f2, r2)] = raw_records(pair.nat, size)
    assert f1 == f2 == "inline"
    want, have = masked(r1), masked(r2)
    # qemu-user fakes /proc/self/stat with a state of "0", which the sh shim's parse (and so
    # this one's) rejects: no start under qemu, the ppid from getppid
    assert have[8] == b"" and want[8] == b"<set>"
    want[8] = have[8] = b""
    assert have == want
