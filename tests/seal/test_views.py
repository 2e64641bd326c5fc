"""review, tree and report say in their header whether the log verified, and mark the
records they show that no verified seal covers (unsealed, or altered since sealed)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import anyio
from mcp.client.session import ClientSession

from mcpshim.log import sessionindex
from tests.fixtures.contract import findings_code
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.mcpscenario import run_session
from tests.fixtures.sealhelp import cli, exec_with, init, shim_execs, verify


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


def test_review_and_verify_give_one_verdict_on_planted_markers(home: Home) -> None:
    # Issue 41 item 5: with parents/ markers planted, `log verify` said TAMPERED while
    # review's header said `sealed: verified`.
    _log(home)
    home.loc.parents_dir.mkdir(parents=True, exist_ok=True)
    (home.loc.parents_dir / "0000.4242").write_text("")  # empty, for a pid to come
    out = cli(home, "log", "verify", "--format", "json")
    assert out.returncode == 1 and json.loads(out.stdout)["verdict"] == "tampered"
    sealed = _review(home)["subject"]["sealed"]  # type: ignore[index]
    assert sealed.startswith("TAMPERED: marker parents/0000.4242"), sealed


def _rewrite_index(home: Home, session: str, keep: int) -> None:
    """Cut `session`'s spans to its first `keep` records and recompute the digest line: a
    consistent rewrite of the index, which no seal covers."""
    path = home.loc.index_dir / "sessions.json"
    body = path.read_bytes().partition(b"\n")[2]
    doc = json.loads(body)
    data = home.loc.log_file.read_bytes()
    for entry in doc["segments"]:
        spans = entry["spans"][session]
        start = spans[0]
        end = start
        for _ in range(keep):
            end = data.index(b"\0\n", end) + 2
        entry["spans"][session] = [start, end]
    body = json.dumps(doc, separators=(",", ":")).encode()
    path.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


def test_a_rewritten_index_is_not_taken_in_a_sealed_log_and_verify_says_so(home: Home) -> None:
    # Issue 41 item 4: the session index is outside the seals. Cut consistently, it made
    # review of the session show one of its execs and drop its finding while the header
    # said `sealed: verified`, and `log verify` said VERIFIED.
    install(home, ["true", "sh"], dash_path())
    shim_execs(home, "s1", "a", "b", "--password=hunter2")
    init(home)
    assert sessionindex.update(home.loc) is not None  # the index, as `run` leaves it
    _rewrite_index(home, "s1", 1)
    out = cli(home, "review", "--dir", str(home.loc.shim_dir), "--session", "s1", "--format",
              "json")  # fmt: skip
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["subject"]["records"] == 3  # every record of the session, not the cut span
    assert _evidence(doc, "MCS110")  # the credential in its third exec
    assert doc["subject"]["sealed"].startswith("TAMPERED: index index/sessions.json (exec.log)"), (
        doc["subject"]
    )
    code, verdict = verify(home)
    assert code == 1 and verdict["verdict"] == "tampered"
    [problem] = [p for p in verdict["problems"] if p["kind"] == "index"]
    assert "sessions s1" in problem["message"] and "spans" in problem["message"]
    listed = cli(home, "sessions", "--format", "json")
    [s1] = [s for s in json.loads(listed.stdout)["sessions"] if s["id"] == "s1"]
    assert s1["execs"] == 3
