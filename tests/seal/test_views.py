"""review, tree and report say in their header whether the log verified, and mark the
records they show that no verified seal covers (unsealed, or altered since sealed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession

from tests.fixtures.contract import findings_code
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.mcpscenario import run_session
from tests.fixtures.sealhelp import cli, exec_with, init, shim_execs


def _log(home: Home) -> None:
    """A sealed exec with a credential (MCS110), then an unsealed composed `sh -c` line."""
    install(home, ["true", "sh"], dash_path())
    shim_execs(home, "s1", "--password=hunter2")
    init(home)
    sh = str(home.loc.shim_dir / "sh")
    subprocess.run([sh, "-c", "printf x | wc -c"], env=home.env, check=False)


def _review(home: Home) -> dict[str, object]:
    out = cli(home, "review", "--dir", str(home.loc.shim_dir), "--format", "json")
    doc = json.loads(out.stdout)
    assert out.returncode == findings_code(doc), out.stderr
    assert isinstance(doc, dict)
    return doc


def _evidence(doc: dict[str, object], rule: str) -> list[str]:
    found = doc["findings"]
    assert isinstance(found, list)
    return [e["where"] for f in found if f["rule"] == rule for e in f["evidence"]]


def test_review_and_tree_mark_what_no_seal_covers(home: Home) -> None:
    _log(home)
    doc = _review(home)
    sealed = doc["subject"]["sealed"]  # type: ignore[index]
    assert sealed.startswith("verified (plain chain) through seal 0 at ")
    assert sealed.endswith("; 1 record(s) after it unsealed")
    assert _evidence(doc, "MCS110") == ["exec.log@0"]
    [composed] = _evidence(doc, "MCS105")
    assert composed.endswith(" [unsealed]")
    tree = cli(home, "tree", "--dir", str(home.loc.shim_dir))
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert f"sealed: {sealed}" in lines
    assert any("hunter2" not in ln and "true" in ln and "[unsealed]" not in ln for ln in lines)
    assert any("wc -c" in ln and ln.endswith("[unsealed]") for ln in lines)


def test_review_says_the_log_was_tampered_with(home: Home) -> None:
    _log(home)
    log = home.loc.log_file
    off, rec = exec_with(log, b"--password=")
    data = bytearray(log.read_bytes())
    data[off + rec.index(b"--password=") + 2] = ord("P")
    log.write_bytes(bytes(data))
    doc = _review(home)
    sealed = doc["subject"]["sealed"]  # type: ignore[index]
    assert sealed.startswith("TAMPERED: altered exec.log@0..")
    assert "mcpshim log verify" in sealed
    assert _evidence(doc, "MCS110") == ["exec.log@0 [altered]"]


def test_a_log_never_sealed_says_so_and_marks_nothing(home: Home) -> None:
    install(home, ["true", "sh"], dash_path())
    sh = str(home.loc.shim_dir / "sh")
    subprocess.run([sh, "-c", "printf x | wc -c"], env=home.env, check=False)
    doc = _review(home)
    assert doc["subject"]["sealed"].startswith("no: the log was never sealed")  # type: ignore[index]
    [composed] = _evidence(doc, "MCS105")
    assert not composed.endswith("]")


def test_report_says_whether_the_log_verified(home: Home, tmp_path: Path) -> None:
    async def script(s: ClientSession) -> None:
        await s.call_tool("git_version", {})
        await anyio.sleep(0.1)

    run_session(home, "S-sealed", script)
    init(home)
    argv = [sys.executable, "-m", "mcpshim", "report", "--dir", str(home.loc.shim_dir)]
    argv += ["--session", "S-sealed", "--format", "md", "-o", "-"]
    md = subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)
    assert md.returncode == 0, md.stderr
    line = next(ln for ln in md.stdout.splitlines() if ln.startswith("- **sealed**"))
    assert line.startswith("- **sealed**: verified (plain chain) through seal 0 at "), line
