"""The ways around path rules, found in a real traced session (MCS411): the ELF loader run
as a program on a binary no rule names, and a program exec'd from a memfd. (What a
contained session refused, MCS410, is tested end to end in tests/e2e/test_contain.py.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.fixtures.home import Home
from tests.fixtures.landlockhelp import LOADER
from tests.fixtures.runhelp import MCPSHIM, needs_trace, only_session, run

MEMFD = (
    "import os\n"
    "fd = os.memfd_create('payload', 0)\n"
    "os.write(fd, open('/bin/true', 'rb').read())\n"
    "os.execve(fd, ['payload'], {})\n"
)


@needs_trace
def test_the_loader_by_hand_and_a_memfd_exec_are_found(home: Home, tmp_path: Path) -> None:
    copy = tmp_path / "copied-true"
    shutil.copy("/bin/true", copy)
    line = f'{LOADER} {copy}; {sys.executable} -c "$MEMFD"'
    done = run(home, ["sh", "-c", line], env={**home.env, "MEMFD": MEMFD})
    assert done.returncode == 0
    sid = only_session(home)
    argv = [*MCPSHIM, "review", "--dir", str(home.loc.shim_dir), "--session", sid]
    review = subprocess.run([*argv, "--format", "json"], env=home.env, capture_output=True,
                            text=True, check=False, timeout=120)  # fmt: skip
    found = [f for f in json.loads(review.stdout)["findings"] if f["rule"] == "MCS411"]
    messages = sorted(f["message"] for f in found)
    assert messages == [
        "ran a program from memory (/memfd:payload): code no exec of its file shows",
        f"ran the ELF loader {LOADER} on {copy}: code no exec of its file shows",
    ]
    assert all(f["severity"] == "high" for f in found)
