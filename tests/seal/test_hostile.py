"""Seal records an agent (or a damaged disk) could leave in the log: `log verify`, review
and `log rotate` say what is wrong, in bounded time, never with a traceback."""

from __future__ import annotations

import dataclasses
import json

import pytest

from mcpshim.seal.record import MARKER
from tests.fixtures.contract import findings_code
from tests.fixtures.home import Home
from tests.fixtures.sealhelp import Templates, cli, kinds, records, sealed_log, seals_in

DEEP = b"[" * 100_000 + b"]" * 100_000


def _append(home: Home, body: bytes) -> None:
    with home.loc.log_file.open("ab") as fh:
        fh.write(MARKER + body + b"\0\n")


def _no_traceback(out: object, code: int) -> None:
    err = getattr(out, "stderr", "")
    assert "Traceback" not in err, err
    assert getattr(out, "returncode", None) == code, err


@pytest.mark.parametrize("what", ["deep", "surrogate", "nan"])
def test_a_seal_record_that_is_not_one(home: Home, seal_templates: Templates, what: str) -> None:
    """Nested 100,000 levels, a lone surrogate in a field the MAC covers (under the real
    key's id, so `--key` computes it), a NaN: each is a bad seal, as the reader refuses
    such an event record."""
    verifier = sealed_log(home, seal_templates, rounds=1)
    real = dataclasses.asdict(seals_in(home.loc.log_file)[0])
    body = {
        "deep": DEEP,
        "surrogate": json.dumps({**real, "n": 1, "prev": "\udc80"}).encode(),
        "nan": json.dumps({**real, "n": 1, "end": float("nan")}).encode(),
    }[what]
    _append(home, body)
    out = cli(home, "log", "verify", "--key", verifier, "--format", "json")
    _no_traceback(out, 1)  # a bad seal: tampering
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and "bad-seal" in kinds(doc), doc["problems"]
    review = cli(home, "review", "--dir", str(home.loc.shim_dir), "--format", "json")
    _no_traceback(review, findings_code(json.loads(review.stdout)))
    assert json.loads(review.stdout)["subject"]["sealed"].startswith("TAMPERED: bad-seal")


def test_seal_numbers_far_apart_cost_nothing(home: Home, seal_templates: Templates) -> None:
    """A seal numbered 10**15 after seal 0, and a rotation note claiming every seal up to it
    removed: verify names the gap by its ends and never counts through it."""
    sealed_log(home, seal_templates, rounds=1)
    log = home.loc.log_file
    [(_, seal0)] = [(o, r) for o, r in records(log) if r.startswith(MARKER)]
    far = 10**15
    forged = seal0.replace(b'"n":0', b'"n":%d' % far)
    note = {"time": "2026-01-01T00:00:00Z", "segments": ["x"], "seals": [[1, far]], "heads": {}}
    with log.open("ab") as fh:
        fh.write(b"\0R\0=1\0=segments-removed\0=" + json.dumps(note).encode() + b"\0\n")
        fh.write(forged)
    out = cli(home, "log", "verify", "--format", "json")
    _no_traceback(out, 1)  # seals missing: tampering
    doc = json.loads(out.stdout)
    [gap] = [p for p in doc["problems"] if p["kind"] == "chain" and "missing" in p["message"]]
    assert f"seal(s) 1..{far - 1} are missing" in gap["message"]
    assert gap["seals"][:2] == [1, 2] and len(gap["seals"]) <= 1000
    review = cli(home, "review", "--dir", str(home.loc.shim_dir), "--format", "json")
    _no_traceback(review, findings_code(json.loads(review.stdout)))
    assert json.loads(review.stdout)["subject"]["sealed"].startswith("TAMPERED: ")


def test_rotation_reads_a_hostile_seal_record_as_the_reader_does(
    home: Home, seal_templates: Templates
) -> None:
    """`log rotate --keep` notes the seals of the segments it removes: a seal record nested
    100,000 levels deep among them is not one, and rotation goes on; a pointer out of
    spill/ among them deletes nothing."""
    sealed_log(home, seal_templates, rounds=2, rotate=True)
    _append(home, DEEP)
    victim = home.loc.log_dir / "victim"  # what a pointer to ../victim would name
    victim.write_text("not a spill file")
    with home.loc.log_file.open("ab") as fh:
        fh.write(b"\0P\0=1\0=../victim\0\n")
    assert cli(home, "log", "rotate").returncode == 0
    out = cli(home, "log", "rotate", "--keep", "0")
    _no_traceback(out, 0)
    assert out.returncode == 0 and "removed" in out.stdout
    assert victim.exists()  # main's spill_name check holds for a sealed log too
    [note] = [r for _, r in records(home.loc.log_file) if b"segments-removed" in r]
    doc = json.loads(note.split(b"\0=")[3][:-2])
    assert doc["seals"] == [[0, 1]] and len(doc["heads"]) == 1
