"""Anchors: each chain head, sent where the user (and so the agent) cannot rewrite it.

By default the system log, through logger(1): journald and syslog take entries from any
user, and only root can remove them. Where no system log runs (containers often have none)
logger still exits 0 and nothing is kept, so the socket is checked first and the sealer
says so once. `--anchor-cmd` sends each anchor line to a command's stdin instead (a file on
other media, ssh to another host...). An anchor line is one JSON object:

    mcpshim-seal: {"end":..,"head":..,"key":..,"log":..,"mcpshim_seal":1,"n":..,...}

`read_anchors` reads them back from the journal (journalctl) or from any file that holds
such lines (a syslog file, the file an anchor command appends to).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mcpshim.base.fdio import open_regular
from mcpshim.errors import InputError
from mcpshim.seal.record import Seal
from mcpshim.seal.state import AnchorConfig

__all__ = [
    "DEFAULT_SOCKET",
    "TAG",
    "Anchor",
    "anchor_line",
    "read_anchors",
    "send",
    "syslog_problem",
]

TAG = "mcpshim-seal"
DEFAULT_SOCKET = "/dev/log"
SEND_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Anchor:
    log: str
    key: str
    n: int
    head: str
    segment: int
    end: int
    time: str
    where: str  # where it was read back (journald, or FILE:LINE)


def anchor_line(log_dir: str, seal: Seal, head: str) -> str:
    doc = {
        "mcpshim_seal": 1,
        "log": log_dir,
        "key": seal.key,
        "n": seal.n,
        "head": head,
        "segment": seal.segment,
        "end": seal.end,
        "time": seal.time,
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def syslog_problem(path: str) -> str:
    """Why nothing would keep what logger sends to `path` ("" when something listens)."""
    try:
        st = os.stat(path)
    except OSError:
        return f"there is no {path}: no system log runs here"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_UNIX, kind) as s:
            try:
                s.connect(path)
                return ""
            except OSError as exc:
                if exc.errno == errno.EPROTOTYPE:
                    continue
                if exc.errno == errno.ECONNREFUSED:
                    return f"nothing listens on {path} (the system logger is not running)"
                return f"{path}: {exc.strerror}"
    return f"{path}: not a datagram or stream socket"


def send(cfg: AnchorConfig, line: str) -> str:
    """Send one anchor; "" when it went, else why not."""
    if cfg.mode == "none":
        return ""
    if cfg.mode == "cmd":
        argv = ["/bin/sh", "-c", cfg.cmd]
        data = f"{TAG}: {line}\n".encode()
    else:
        logger = shutil.which("logger")
        if logger is None:
            return "logger is not installed"
        argv = [logger, "-t", TAG]
        if sys.platform.startswith("linux"):
            argv.append("--socket-errors=on")  # util-linux: fail instead of dropping it
        if cfg.socket != DEFAULT_SOCKET:
            argv += ["-u", cfg.socket]
        argv += ["--", line]
        data = b""
    try:
        done = subprocess.run(
            argv,
            input=data,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=SEND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{argv[0]} took more than {SEND_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"{argv[0]}: {exc.strerror}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return f"exit status {done.returncode}" + (f": {why[-1]}" if why else "")
    return ""


def _parse(line: str, where: str) -> Anchor | None:
    i = line.find('{"')
    if i < 0 or '"mcpshim_seal"' not in line:
        return None
    try:
        doc = json.loads(line[i:].strip())
        if not isinstance(doc, dict) or doc.get("mcpshim_seal") != 1:
            return None
        return Anchor(
            str(doc["log"]),
            str(doc["key"]),
            int(doc["n"]),
            str(doc["head"]),
            int(doc["segment"]),
            int(doc["end"]),
            str(doc["time"]),
            where,
        )
    except (ValueError, KeyError, TypeError):
        return None


def read_anchors(source: str) -> list[Anchor]:
    """Every anchor in the journal (`journald`) or in the file `source`, in order."""
    if source == "journald":
        journalctl = shutil.which("journalctl")
        if journalctl is None:
            raise InputError("journalctl is not installed: give --anchors FILE")
        try:
            done = subprocess.run(
                [journalctl, "-q", "--no-pager", "-o", "cat", "-t", TAG],
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"journalctl: {exc}") from None
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip()
            raise InputError(f"journalctl failed: {why or done.returncode}")
        lines = done.stdout.decode(errors="replace").splitlines()
        found = (_parse(line, "journald") for line in lines)
        return [a for a in found if a is not None]
    path = Path(source)
    try:
        with open_regular(path) as fh:
            text = fh.read().decode(errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot read anchors: {exc.strerror}") from None
    found = (_parse(line, f"{path}:{i}") for i, line in enumerate(text.splitlines(), 1))
    return [a for a in found if a is not None]
