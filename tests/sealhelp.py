"""Helpers for the sealing tests: the CLI, a sealed log built with real shims, and the
edits an agent would make to it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from conftest import Home, dash_path, home_at, home_env, install
from mcpshim.seal import keys
from mcpshim.seal import state as seal_state
from mcpshim.seal.record import MARKER, Seal, utc_stamp

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def cli(home: Home, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    loc = ["--dir", str(home.loc.shim_dir), "--log-dir", str(home.loc.log_dir)]
    argv = [*MCPSHIM, args[0], *loc, *args[1:]] if args[0] == "log" else [*MCPSHIM, *args]
    return subprocess.run(
        argv, env=home.env, input=stdin, capture_output=True, text=True, timeout=120
    )


def anchors_file(home: Home) -> Path:
    return home.root.parent / "anchors-kept-elsewhere"


def init(home: Home, *extra: str) -> str:
    """Seal the log with a new key (1 s epochs), anchors appended to a file; the verifier."""
    sink = ["--anchor-cmd", f"cat >> {anchors_file(home)}"] if "--no-anchor" not in extra else []
    out = cli(home, "log", "seal", "--init", "--period", "1", *sink, *extra)
    assert out.returncode == 0, out.stderr
    verifier = out.stdout.strip()
    assert verifier.startswith("mcpshim-verifier-1:"), out.stdout
    return verifier


def seal(home: Home) -> str:
    out = cli(home, "log", "seal")
    assert out.returncode == 0, out.stderr
    return out.stderr


def verify(home: Home, *extra: str) -> tuple[int, dict[str, Any]]:
    out = cli(home, "log", "verify", "--format", "json", *extra)
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def kinds(doc: dict[str, Any]) -> set[str]:
    return {p["kind"] for p in doc["problems"]}


def shim_execs(home: Home, session: str, *args: str) -> None:
    env = {**home.env, "MCPSHIM_SESSION": session}
    for a in args:
        subprocess.run([str(home.loc.shim_dir / "true"), a], env=env, check=True)


Templates = dict[tuple[int, bool], tuple[Home, str]]


def sealed_log(
    home: Home, templates: Templates | None = None, rounds: int = 3, rotate: bool = False
) -> str:
    """A log of real shim execs, sealed after each round (session r1, r2, ...); with
    `rotate`, rotated after each round but the last. Returns the verifier.

    With `templates` (the `seal_templates` fixture), each kind of log is built once and
    copied: the log, the sealer state (pointed at the copy) and the anchors file."""
    if templates is None:
        return _build(home, rounds, rotate)
    if (rounds, rotate) not in templates:
        base = Path(tempfile.mkdtemp(prefix="mcpshim-seal-tpl-"))
        tpl = make_home(base / "home")
        templates[(rounds, rotate)] = (tpl, _build(tpl, rounds, rotate))
    tpl, verifier = templates[(rounds, rotate)]
    _clone(tpl, home)
    return verifier


def make_home(root: Path) -> Home:
    """A Home like the fixture's, for a template built outside any test."""
    root.mkdir(parents=True)
    return home_at(root, home_env(root))


def _clone(tpl: Home, home: Home) -> None:
    shutil.copytree(tpl.loc.log_dir, home.loc.log_dir)
    text = anchors_file(tpl).read_text()  # as if this log had sent them
    anchors_file(home).write_text(text.replace(f'"{tpl.loc.log_dir}"', f'"{home.loc.log_dir}"'))
    st = seal_state.load(state_path(tpl))
    assert st is not None
    names = {(p.stat().st_dev, p.stat().st_ino): p.name for p in tpl.loc.log_dir.iterdir()}
    segs = []
    for t in st.segments:
        new = (home.loc.log_dir / names[(t.dev, t.ino)]).stat()
        segs.append(dataclasses.replace(t, dev=new.st_dev, ino=new.st_ino))
    log_dir = os.fsdecode(os.path.abspath(home.loc.log_dir))
    cmd = st.anchor.cmd.replace(str(anchors_file(tpl)), str(anchors_file(home)))
    anchor = dataclasses.replace(st.anchor, cmd=cmd)
    st = dataclasses.replace(st, log_dir=log_dir, segments=tuple(segs), anchor=anchor)
    seal_state.save(state_path(home), st, durable=False)
    install(home, ["true"], dash_path())


def _build(home: Home, rounds: int, rotate: bool) -> str:
    install(home, ["true"], dash_path())
    verifier = ""
    for r in range(1, rounds + 1):
        shim_execs(home, f"r{r}", f"first-of-{r}", f"second-of-{r}", f"third-of-{r}")
        if r == 1:
            verifier = init(home)
        else:
            seal(home)
        if rotate and r < rounds:
            assert cli(home, "log", "rotate").returncode == 0
    return verifier


def records(path: Path) -> list[tuple[int, bytes]]:
    """(offset, bytes) of every record and pointer in a segment, in order."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        end = data.index(b"\0\n", pos) + 2
        out.append((pos, data[pos:end]))
        pos = end
    return out


def exec_with(path: Path, text: bytes) -> tuple[int, bytes]:
    return next((off, r) for off, r in records(path) if text in r)


def state_path(home: Home) -> Path:
    name = seal_state.default_state_path(home.loc.log_dir).name
    return Path(home.env["XDG_STATE_HOME"]) / "mcpshim" / "seal" / name


def load_state(home: Home) -> seal_state.State:
    st = seal_state.load(state_path(home))
    assert st is not None
    return st


def reseal_plain(
    home: Home,
    path: Path,
    new_records: list[bytes],
    sign: tuple[int, int, bytes] | None = None,
    backdate: bool = False,
) -> None:
    """Write `new_records` as the segment, recomputing every seal from the plain chain as
    an agent can: ranges, hashes and previous heads. MACs stay as they were, unless `sign`
    (epoch, session, key) re-signs each seal whose range changed, dated just after the last
    real seal (what the key in the state file allows), or left at its own date and key
    (`backdate`). The state is brought in line too."""
    st = load_state(home)
    old = path.read_bytes()
    last_real = max(s.ms for s in seals_in(path).values())
    out = bytearray()
    head, orig_at, start = "", 0, 0
    changed = False
    last_at, last_end = -1, 0
    for given in new_records:
        rec = given
        if rec.startswith(MARKER):
            seal = Seal.parse(rec[len(MARKER) : -2])
            orig_at = old.find(rec)
            gap = orig_at - seal.end if orig_at >= 0 else 0
            end = len(out) - gap
            digest = hashlib.sha256(bytes(out[start:end])).hexdigest()
            new = dataclasses.replace(
                seal, start=start, end=end, sha256=digest, prev=head or seal.prev
            )
            changed = changed or new != seal
            if sign is not None and changed:
                epoch, session, key = sign
                ms = max((st.origin + epoch * st.period) * 1000, last_real + 1)
                if not backdate:
                    new = dataclasses.replace(new, epoch=epoch, sealer=session, time=utc_stamp(ms))
                new = dataclasses.replace(new, mac=keys.mac(key, new.message()))
            rec = new.encode()
            head = hashlib.sha256(rec).hexdigest()
            last_at, last_end, start = len(out), end, end
        out += rec
    path.write_bytes(bytes(out))
    segs = tuple(
        dataclasses.replace(t, end=last_end, at=last_at) if t.ino == path.stat().st_ino else t
        for t in st.segments
    )
    seal_state.save(state_path(home), dataclasses.replace(st, head=head, segments=segs), False)


def seals_in(path: Path) -> dict[int, Seal]:
    return {
        r[1].n: r[1]
        for r in (
            (o, Seal.parse(b[len(MARKER) : -2])) for o, b in records(path) if b.startswith(MARKER)
        )
    }
