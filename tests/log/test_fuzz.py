"""Fuzz: damaged logs through log, tree, review, report, log verify and sessions never end
in a traceback.

2,000 seeded cases (tests/fixtures/logfuzz.py builds each log directory: torn records, bad
tags, spill pointers to nowhere, huge or non-numeric fields, event records with JSON that
is not an object, not finite, too deep, or has fields of the wrong type; seal records among
them). Every case goes through the reader and every view of a record `log` prints, then
through one of the six commands in turn (one in ten through all six; `log verify` with
the key the fuzz's seals are signed with), in this process, by the CLI's own entry
point (`main`, the one place errors become exit codes) with a strict UTF-8 stdout as a
terminal has; a sample also runs as real `mcpshim` processes. Each command must exit 0,
1 or 2 with no traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from mcpshim.base.display import dumps
from mcpshim.cli import main
from mcpshim.family.model import Assembler
from mcpshim.log import execlog, logview
from mcpshim.paths import Locations
from mcpshim.render.ecs import ecs_doc
from tests.fixtures.home import Home
from tests.fixtures.logfuzz import EVENTS, SEAL_VERIFIER, LogFuzzer

CASES = 2000
CHUNKS = 8  # test items, so a failure names a small range of seeds
SUBPROCESS_SAMPLE = 6


def _argvs(seed: int, log_dir: Path, shim_dir: Path) -> list[list[str]]:
    rng = random.Random(seed ^ 0x5EED)
    where = ["--dir", str(shim_dir), "--log-dir", str(log_dir)]
    session = ["--session", "S1"] if rng.random() < 0.3 else []
    key = SEAL_VERIFIER.text()
    return [
        ["log", *where, "--format", rng.choice(["text", "json", "ecs"]), *session],
        ["tree", *where, "--format", rng.choice(["text", "json", "dot"]), *session],
        ["review", *where, "--format", rng.choice(["text", "json", "sarif"]), *session],
        ["report", *where, "-o", "-", "--format", rng.choice(["html", "md"]), *session],
        ["log", *where, "verify", "--key", key, "--format", rng.choice(["text", "json"])],
        ["sessions", *where, "--format", rng.choice(["text", "json"])],
    ]


def _run_in_process(argv: list[str]) -> tuple[int, str]:
    """(exit code, stderr) of one command; an exception that escapes main is a failure."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    except BaseException:
        return -1, traceback.format_exc()
    else:
        code = 0
    err.flush()
    return code, err.buffer.getvalue().decode()


def _case_dir(tmp_path: Path, seed: int) -> tuple[Path, Path]:
    log_dir = tmp_path / f"case{seed}" / "log"
    LogFuzzer(seed).write_case(log_dir)
    return log_dir, tmp_path / "no-shims"


def _read_and_view(log_dir: Path, shim_dir: Path) -> None:
    """What `log` does with each record, in every format (the pure functions)."""
    problems: list[execlog.LogProblem] = []
    model = Assembler()
    for rec in execlog.iter_records(Locations(shim_dir, log_dir), problems):
        logview.record_text(rec).encode()
        dumps(logview.record_json(rec)).encode()
        for img in model.feed(rec):
            dumps(ecs_doc(img, lambda _boot: None, 0)).encode()
    for img in model.finish():
        dumps(ecs_doc(img, lambda _boot: None, 0)).encode()


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_damaged_logs_never_end_in_a_traceback(home: Home, tmp_path: Path, chunk: int) -> None:
    # `home`: report and approve keep identities in the user's cache dir (never the real one)
    failures: list[str] = []
    for seed in range(chunk, CASES, CHUNKS):
        log_dir, shim_dir = _case_dir(tmp_path, seed)
        try:
            _read_and_view(log_dir, shim_dir)
        except Exception:
            failures.append(f"seed {seed}: reading and viewing\n{traceback.format_exc()}")
        argvs = _argvs(seed, log_dir, shim_dir)
        for argv in argvs if seed % 10 == 0 else [argvs[seed // CHUNKS % len(argvs)]]:
            code, err = _run_in_process(argv)
            if code not in (0, 1, 2) or "Traceback" in err:
                failures.append(f"seed {seed}: mcpshim {' '.join(argv[:1] + argv[5:])}\n{err}")
        if len(failures) >= 3:
            break
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("seed", range(0, CASES, CASES // SUBPROCESS_SAMPLE))
def test_a_sample_through_the_real_command(home: Home, tmp_path: Path, seed: int) -> None:
    log_dir, shim_dir = _case_dir(tmp_path, seed)
    env = {**home.env, "LC_ALL": "C.UTF-8"}
    for argv in _argvs(seed, log_dir, shim_dir):
        proc = subprocess.run(
            [sys.executable, "-m", "mcpshim", *argv],
            capture_output=True,
            env=env,
            timeout=120,
        )
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode in (0, 1, 2), stderr
        assert "Traceback" not in stderr, stderr


@pytest.mark.parametrize("odd_id", [[1, 2], {"k": 1}])
def test_a_call_whose_id_is_not_a_scalar_is_reviewed(tmp_path: Path, odd_id: object) -> None:
    """A JSON-RPC id that is a list or an object (a refused hostile message keeps the id as
    sent) used to key the per-call verdicts and end review in a TypeError; the call is
    shown with the id's JSON text."""
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    kinds = ["mcp-session", "session-start", "mcp-request", "observed", "mcp-response"]
    body = b"".join(
        execlog.encode_record(
            kind,
            [
                json.dumps(
                    {**EVENTS[kind], **({"id": odd_id} if "id" in EVENTS[kind] else {})}
                ).encode()
            ],
        )
        for kind in kinds
    )
    (log_dir / "exec.log").write_bytes(body)
    argv = ["--dir", str(tmp_path / "no-shims"), "--log-dir", str(log_dir), "--session", "S1"]
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main(["review", *argv, "--format", "json"])
    assert done.value.code in (0, 1)
    out.flush()
    [call] = json.loads(out.buffer.getvalue())["calls"]
    assert call["id"] == json.dumps(odd_id, sort_keys=True, separators=(",", ":"))
    code, err = _run_in_process(["review", *argv])
    assert code in (0, 1) and "Traceback" not in err, err
