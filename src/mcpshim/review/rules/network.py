"""Network-capable helpers: the destinations their arguments name, checked against the policy.

An argument is a hint, not a contact: curl given a URL may never connect (a closed port,
a failed lookup). The contact is what the tracer saw (review.rules.connections); in a
traced session these findings are hints beside it (info, review.pipeline), and no call's
"reached the network" rests on them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

from mcpshim.family.tree import Image
from mcpshim.review.findings import Severity, define_rule
from mcpshim.review.rules.registry import Context, Hit, check
from mcpshim.review.shapes import command_name, operands, subcommand

UNEXPECTED = define_rule(
    "MCS108",
    "network-destination",
    Severity.MEDIUM,
    "A network-capable helper was given a destination the policy does not list (in its "
    "arguments: a hint of where it connects, not an observed contact).",
    "If the destination is expected, add it to [network].destinations (or the command's "
    "destinations) in the policy; otherwise find out which tool call asked for it.",
    cwe=["CWE-200"],
    confidence="hint",
    answers=("hint",),
)
UNKNOWN = define_rule(
    "MCS109",
    "network-destination-unknown",
    Severity.LOW,
    "A network-capable helper ran, but its destination is not in its arguments "
    "(a git remote name, a config file).",
    "Pass explicit destinations, or review the helper's configuration "
    "(git remote -v, ~/.ssh/config).",
    cwe=["CWE-200"],
    confidence="hint",
    answers=("hint",),
)

HELPERS = frozenset(
    {"ssh", "scp", "sftp", "curl", "wget", "nc", "ncat", "netcat", "rsync", "telnet"}
)
_GIT_NET = frozenset({"clone", "fetch", "pull", "push", "ls-remote", "archive", "submodule"})
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>\[[^\]]+\]|[^@/:\s]+):(?!//)")


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_HOSTPORT = re.compile(r"^(\[[^\]]*\]|[^:]*)(?::(\d*))?$")


def _from_url(text: str) -> str | None:
    """host or host:port of a URL; tolerant of userinfo the log redacted ([REDACTED:...])."""
    m = _URL.match(text)
    if not m:
        return None
    hp = _HOSTPORT.match(m.group(1).rsplit("@", 1)[-1])
    if not hp or not hp.group(1):
        return None
    host = hp.group(1).lower()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{hp.group(2)}" if hp.group(2) else host.strip("[]")


def _local_repo(op: str) -> bool:
    """A repository named by a local path (git's rules: a URL has ://, scp-like syntax has
    a colon before the first slash; anything else is a path)."""
    if op.startswith("file://"):
        return True
    if "://" in op or _SCP_LIKE.match(op):
        return False
    return op.startswith(("/", "./", "../", "~")) or op in (".", "..")


def _host_only(text: str) -> str:
    return text.rsplit("@", 1)[-1]


def destinations(img: Image) -> list[str] | None:
    """host or host:port for each destination; None when the command is not a network helper."""
    name = command_name(img)
    ops = operands(img)
    args = [a.decode("utf-8", "surrogateescape") for a in img.args]
    if name == "git":
        if subcommand(img) not in _GIT_NET:
            return None
        if len(ops) > 1 and _local_repo(ops[1]):
            return None  # a clone or fetch from a path on this machine reaches no network
        out: list[str] = []
        for op in ops[1:]:
            d = _from_url(op) if "://" in op else None
            if d is None and (m := _SCP_LIKE.match(op)):
                d = m.group("host").strip("[]")
            if d:
                out.append(d)
        return out
    if name not in HELPERS:
        return None
    if name == "ssh":
        port = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-p"), None)
        if not ops:
            return []
        d = _from_url(ops[0]) if ops[0].startswith("ssh://") else _host_only(ops[0])
        return [f"{d}:{port}" if port and d and ":" not in d else d] if d else []
    if name in ("scp", "rsync", "sftp"):
        out = []
        for op in ops:
            d = _from_url(op) if "://" in op else None
            if d is None and (m := _SCP_LIKE.match(op)):
                d = m.group("host").strip("[]")
            if d is None and name == "sftp" and op == ops[0]:
                d = _host_only(op)
            if d:
                out.append(d)
        return out
    if name in ("nc", "ncat", "netcat", "telnet"):
        if not ops:
            return []
        return [f"{ops[0]}:{ops[1]}" if len(ops) > 1 else ops[0]]
    # curl, wget: URLs (curl also takes a bare host as a URL)
    out = [d for a in args if "://" in a and (d := _from_url(a))]
    if not out and name == "curl":
        out = [o.split("/", 1)[0] for o in ops if "." in o and not o.startswith(("@", "/"))]
    return out


def allowed(dest: str, patterns: tuple[str, ...]) -> bool:
    host = dest.rsplit(":", 1)[0] if dest.count(":") == 1 else dest
    return any(fnmatch.fnmatchcase(dest, p) or fnmatch.fnmatchcase(host, p) for p in patterns)


@check(UNEXPECTED, UNKNOWN)
def network_helper(ctx: Context, img: Image) -> Iterator[Hit]:
    dests = destinations(img)
    if dests is None:
        return
    name = command_name(img)
    target = img.target.decode("utf-8", "surrogateescape")
    if not dests:
        yield Hit(
            UNKNOWN,
            f"{name} {subcommand(img)} can reach the network; destination not in its arguments",
            f"{name}\0{subcommand(img)}",
            target,
            {"command": name, "path": target},
        )
        return
    patterns = ctx.policy.allowed_destinations(name)
    for d in dict.fromkeys(dests):
        if allowed(d, patterns):
            continue
        yield Hit(
            UNEXPECTED,
            f"{name}'s arguments name {d}, which the policy does not list",
            f"{name}\0{d}",
            target,
            {"command": name, "path": target, "destination": d},
        )
