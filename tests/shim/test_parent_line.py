"""The shell that started a shimmed child (parent evidence) is shown wherever the child is:
`log` (text, json, ecs), `tree` (text, json, dot) and a review finding's evidence, its argv
quoted like any (every boundary kept), escaped for the terminal, its secrets redacted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcpshim.shim import install as shim_install
from tests.fixtures.home import Home

MCPSHIM = [sys.executable, "-m", "mcpshim"]
PW = "hunter2-correct-horse"


def _cli(home: Home, *args: str, code: int = 0) -> str:
    out = subprocess.run(
        [*MCPSHIM, *args], env=home.env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == code, out.stderr
    assert "\x1b" not in out.stdout
    return out.stdout


@pytest.fixture
def seeded(home: Home, tmp_path: Path, interpreter: str) -> Home:
    """`/bin/sh -c LINE`, started by absolute path (no shim sees the shell), runs a shimmed
    curl with a credential; LINE holds a newline and a terminal escape too."""
    fake = tmp_path / "bin" / "curl"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    shim_install.install(
        home.loc, [], {"curl": str(fake)}, interpreter=interpreter, allow_unsafe=True
    )
    line = f"curl -u admin:{PW} https://api.example/x\nprintf '\\033[2J' >/dev/null"
    env = {**home.env, "PATH": f"{home.loc.shim_dir}:/usr/bin:/bin"}
    subprocess.run(["/bin/sh", "-c", line], env=env, check=True, timeout=60)
    [rec] = home.execs()
    assert rec.parent_argv[:2] == (b"/bin/sh", b"-c")  # kept, and read below
    return home


LINE = "curl -u [REDACTED:option-value] https://api.example/x\\nprintf \\'\\\\033[2J\\' >/dev/null"
SHOWN = f"started by /bin/sh -c $'{LINE}'"


def test_the_parent_line_loses_its_secret(seeded: Home) -> None:
    [rec] = seeded.execs()
    assert rec.parent_argv[2].startswith(b"curl -u [REDACTED:option-value] https")
    assert PW.encode() not in seeded.loc.log_file.read_bytes()


def test_log_shows_the_parent_line_in_every_format(seeded: Home) -> None:
    text = _cli(seeded, "log")
    assert SHOWN in text.splitlines()[1] and PW not in text
    docs = [json.loads(x) for x in _cli(seeded, "log", "--format", "json").splitlines()]
    [doc] = [d for d in docs if d.get("shim") == "curl"]
    assert doc["parent_cmdline"].startswith("/bin/sh -c curl -u [REDACTED:option-value] ")
    assert doc["parent_argv"][:2] == ["/bin/sh", "-c"]
    assert "\\033[2J" in doc["parent_argv"][2]  # the script's own text, as it was typed
    # ECS: one document per exec of the process model, the shell's own too (its argv is
    # what its child kept, exactly)
    ecs = [json.loads(x) for x in _cli(seeded, "log", "--format", "ecs").splitlines()]
    [child] = [e for e in ecs if e["process"]["name"] == "curl"]
    assert child["process"]["parent"]["args"] == doc["parent_argv"]
    assert child["process"]["parent"]["command_line"] == SHOWN.removeprefix("started by ")
    [shell] = [e for e in ecs if e["process"]["pid"] == doc["ppid"]]
    assert shell["process"]["args"] == doc["parent_argv"]


def test_tree_shows_the_parent_line(seeded: Home) -> None:
    text = _cli(seeded, "tree")
    assert SHOWN in text and PW not in text
    doc = json.loads(_cli(seeded, "tree", "--format", "json"))

    def walk(nodes: list[dict[str, object]]) -> list[dict[str, object]]:
        return [n for node in nodes for n in [node, *walk(node["children"])]]  # type: ignore[arg-type]

    images = [i for n in walk(doc["roots"]) for i in n["images"]]  # type: ignore[attr-defined]
    [child] = [i for i in images if i["command"] == "curl"]
    assert child["parent_argv"][2].startswith("curl -u [REDACTED")
    assert "started by" in _cli(seeded, "tree", "--format", "dot")


def test_review_evidence_shows_the_parent_line(seeded: Home) -> None:
    text = _cli(seeded, "review", code=1)  # MCS110 is high
    assert "MCS110" in text and SHOWN in text and PW not in text
    doc = json.loads(_cli(seeded, "review", "--format", "json", code=1))
    [finding] = [f for f in doc["findings"] if f["rule"] == "MCS110"]
    assert SHOWN in finding["evidence"][0]["text"]
    assert finding["evidence"][0]["parent_cmdline"].startswith("/bin/sh -c curl -u [REDACTED")
