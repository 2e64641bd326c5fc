"""Boot anchors are evidence: `boot/<id>` dates every exec record of its boot, so the sealer
seals it and `log verify` holds it to what was sealed. The attack of issue 28 (item 7): a
real `run --mcp` session whose tool call runs a traced curl, sealed and anchored; then
`echo 1500000000.000000 > boot/<id>` moves the curl out of its call, and verify must say so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.log.boot import current_boot_id, now_anchor
from mcpshim.seal.record import MARKER, Seal
from tests.fixtures.contract import verify_code
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.mcpscenario import SHIMS, TOOLS, attribution_of
from tests.fixtures.runhelp import events, needs_trace, poll
from tests.fixtures.sealhelp import (
    Templates,
    anchors_file,
    cli,
    init,
    kinds,
    seal,
    sealed_log,
    shim_execs,
)

FORGED = "1500000000.000000\n"


def _anchor(home: Home) -> Path:
    return home.loc.boot_dir / current_boot_id()


def _problems(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in doc["problems"] if p["kind"] == kind]


def test_an_anchor_edited_after_it_was_sealed_is_tampering(
    home: Home, seal_templates: Templates
) -> None:
    verifier = sealed_log(home, seal_templates)
    anchor = _anchor(home)
    kept = anchor.read_text()
    code, doc = _keyed(home, verifier)
    assert code == 0 and doc["verdict"] == "verified", doc["problems"]
    anchor.write_text(FORGED)
    code, doc = _keyed(home, verifier)
    assert code == 1 and doc["verdict"] == "tampered"
    [p] = _problems(doc, "boot-anchor")
    assert p["where"] == f"boot/{current_boot_id()}"
    assert "edited after it was sealed" in p["message"] and "1500000000.000000" in p["message"]
    anchor.unlink()  # removed: every record of the boot loses its time
    _, doc = _keyed(home, verifier)
    assert "is gone" in _problems(doc, "boot-anchor")[0]["message"]
    anchor.write_text(kept)
    code, doc = _keyed(home, verifier)
    assert code == 0, doc["problems"]


def _keyed(home: Home, verifier: str) -> tuple[int, dict[str, Any]]:
    out = cli(home, "log", "verify", "--format", "json", "--key", "-", stdin=verifier)
    doc = json.loads(out.stdout)
    assert out.returncode == verify_code(doc), out.stderr
    return out.returncode, doc


def test_an_edit_the_sealer_saw_is_named_between_its_seals(home: Home) -> None:
    install(home, ["true"], dash_path())
    verifier = init(home)
    _anchor(home).write_text(FORGED)
    shim_execs(home, "s", "after-the-edit")
    seal(home)  # seals the new value beside the old: the edit is in the chain
    _anchor(home).write_text(FORGED)
    _, doc = _keyed(home, verifier)
    [p] = _problems(doc, "boot-anchor")
    assert "edited in between" in p["message"] and len(p["seals"]) == 2
    assert "boot-anchor" in kinds(doc)


def test_an_anchor_at_odds_with_the_clock_when_first_sealed_is_a_gap(home: Home) -> None:
    install(home, ["true"], dash_path())
    _anchor(home).write_text(FORGED)  # edited before any seal saw it
    verifier = init(home)
    code, doc = _keyed(home, verifier)
    assert code == 1 and doc["verdict"] == "gaps"
    [p] = _problems(doc, "boot-anchor-clock")
    assert "edited before it was sealed" in p["message"]


def test_a_shims_whole_seconds_refined_by_install_is_no_edit(home: Home) -> None:
    install(home, ["true"], dash_path())
    anchor = _anchor(home)
    anchor.unlink()
    shim_execs(home, "s", "one")  # the first exec of a boot with no anchor writes btime
    whole = anchor.read_text().strip()
    assert whole.isdigit() and abs(int(whole) - now_anchor()) < 2
    verifier = init(home)
    install(home, ["true", "false"], dash_path())  # refines it to the microsecond
    assert anchor.read_text().strip() != whole and "." in anchor.read_text()
    code, doc = _keyed(home, verifier)
    assert code == 0, doc["problems"]
    seal(home)  # the refined value sealed beside the first: still no edit
    code, doc = _keyed(home, verifier)
    assert code == 0, doc["problems"]
    # and install never writes over an anchor otherwise
    anchor.write_text(FORGED)
    install(home, ["true"], dash_path())
    assert anchor.read_text() == FORGED


def test_the_anchors_are_in_the_seal_and_under_its_mac(home: Home) -> None:
    install(home, ["true"], dash_path())
    verifier = init(home)
    raw = home.loc.log_file.read_bytes()
    at = raw.index(MARKER)
    first = Seal.parse(raw[at + len(MARKER) : raw.index(b"\0\n", at)])
    [(boot, anchor, clock)] = first.boots
    assert boot == current_boot_id() and anchor == _anchor(home).read_text().strip()
    assert abs(float(clock) - float(anchor)) < 1
    # an agent that changes the sealed anchor in the seal record breaks its MAC
    forged = raw.replace(anchor.encode(), b"1500000000.000000", 1)
    home.loc.log_file.write_bytes(forged)
    _, doc = _keyed(home, verifier)
    assert {"forged"} <= kinds(doc) or {"bad-seal", "chain"} & kinds(doc)


@needs_trace
def test_a_traced_curl_moved_out_of_its_tool_call_does_not_verify(
    home: Home, tmp_path: Path
) -> None:
    install(home, SHIMS)
    verifier = init(home)
    run = ["run", "--dir", str(home.loc.shim_dir), "--mcp", "--", sys.executable, str(TOOLS)]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpshim", *run], env=home.env
    )
    curl = "/usr/bin/curl -s -m 2 http://127.0.0.1:9/ || true"  # by absolute path: traced only

    async def drive() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await s.call_tool("shell", {"line": curl})

    anyio.run(drive)
    [start] = poll(lambda: events(home, "session-end") and events(home, "session-start"), "end")
    sid = start["session"]
    poll(lambda: _keyed(home, verifier)[0] == 0 or None, "the session sealed")

    def curl_owner() -> Any:
        att = attribution_of(home, sid)
        [node] = [n for n in att.nodes() if any(i.command == "curl" for i in n.images)]
        return att.owner.get(node.id)

    assert curl_owner() == 0  # under the one tool call
    code, doc = _keyed_anchored(home, verifier)
    assert code == 0 and doc["verdict"] == "verified", doc["problems"]
    _anchor(home).write_text(FORGED)
    assert curl_owner() != 0  # the edit moves it out of its call...
    code, doc = _keyed_anchored(home, verifier)
    assert code == 1 and doc["verdict"] == "tampered"  # ...and verify says so
    assert [p["where"] for p in _problems(doc, "boot-anchor")] == [f"boot/{current_boot_id()}"]
    header = subprocess.run(
        [sys.executable, "-m", "mcpshim", "review", "--dir", str(home.loc.shim_dir),
         "--session", sid, "--fail-on", "high"],
        env=home.env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "TAMPERED: boot-anchor" in header.stdout, header.stdout


def _keyed_anchored(home: Home, verifier: str) -> tuple[int, dict[str, Any]]:
    out = cli(
        home, "log", "verify", "--format", "json", "--key", "-", "--anchors",
        str(anchors_file(home)), stdin=verifier,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert out.returncode == verify_code(doc), out.stderr
    return out.returncode, doc
