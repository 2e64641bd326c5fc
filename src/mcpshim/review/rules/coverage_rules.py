"""shim-bypassed (MCS405): a shimmed command ran without its shim, and why (family.bypass).

Not a per-image check: the cause needs the exec's ancestors, so the findings are made from a
session's coverage (family.coverage) after review's pass. One finding per command, cause
and place: the ancestor that handed on the PATH (or, for a call by absolute path, the
parent), so the occurrences of one spot stay together and review files them under the tool
call whose process they are. The session's own command (the launch line, lint-path's
business) is counted in the coverage line but is no finding. git running itself (a command
from git's own exec-path, which git puts first on the PATH of what it runs) is info.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from mcpshim.family.bypass import shell_options
from mcpshim.family.coverage import Bypassed, SessionCoverage
from mcpshim.family.view import evidence_line
from mcpshim.review.findings import Evidence, Finding, Severity, define_rule
from mcpshim.review.policy import Policy
from mcpshim.review.rules.network import HELPERS
from mcpshim.review.shapes import GIT_EXEC_DIRS, under

__all__ = ["BYPASSED", "bypass_findings"]

BYPASSED = define_rule(
    "MCS405",
    "shim-bypassed",
    Severity.LOW,
    "A command that has a shim ran without going through it: called by absolute path, or "
    "looked up through a PATH on which the shim directory was not first (a login shell's "
    "profile, `env -i`, a PATH= assignment); only the trace (or, while it lived, the "
    "sampler) saw it. Medium for a network or credential helper (git, ssh, curl...); info "
    "for a program its parent runs again by path (node's workers) and git's own helpers.",
    "Call programs by name with the shim directory first on PATH; avoid login shells "
    "(`bash -l` reads /etc/profile whatever the environment says, and it resets PATH on "
    "Debian; zsh login shells keep the shims first through `mcpshim run`'s ZDOTDIR route); "
    "keep tracing on (the default) so such execs stay on record.",
    cwe=["CWE-778"],
    answers=(),
)


#: commands that reach the network or hold credentials: their bypass is medium (docs/verdicts)
_REACHING = frozenset({"git", "ssh", "gpg", "docker", "kubectl", "gh", "npm", "npx", "pip",
                       "pip3", "uvx", "pipx", "aws", "gcloud", "az"})  # fmt: skip
#: interpreters: what they run is judged by its own rules; their bypass alone is low
_INTERPRETERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "node", "nodejs", "python",
                           "python3", "perl", "ruby"})  # fmt: skip


def bypass_findings(coverages: Iterable[SessionCoverage], policy: Policy) -> list[Finding]:
    """The MCS405 findings of each session's bypasses (the policy is applied by the caller).
    Medium for a network or credential helper; low for the rest; info for git running git
    from its own helpers and for a program its own parent runs again by path (node's
    workers): neither went anywhere the parent's program was not."""
    sensitive = (frozenset(policy.sensitive_commands) - _INTERPRETERS) | HELPERS | _REACHING
    out: list[Finding] = []
    for cov in coverages:
        groups: dict[tuple[str, str, object, bool], list[Bypassed]] = {}
        for b in cov.bypassed:
            if b.root or _shell_line_by_path(b):
                continue
            key = (b.exec.command, b.cause.kind, _place_of(b), _git_itself(b))
            groups.setdefault(key, []).append(b)
        for (command, kind, _place, git_itself), items in groups.items():
            first = items[0]
            message = f"{command} ran without its shim: {first.cause.detail}"
            severity = Severity.MEDIUM if command in sensitive else None
            if git_itself:
                exe = os.fsdecode(first.exec.filename)
                message = f"{command} ran from git's own helpers ({exe}): git running itself"
                severity = Severity.INFO
            elif kind == "itself":
                severity = Severity.INFO
            evidence = tuple(
                Evidence(
                    b.image.where,
                    f"{evidence_line(b.image)}: {b.cause.detail}",
                    {
                        "command": command,
                        "path": b.exec.filename.decode("utf-8", "replace"),
                        "pid": b.exec.pid,
                        "ppid": b.exec.ppid,
                        "start_ticks": b.exec.start,
                        "boot_id": b.exec.boot,
                        "source": b.image.source,
                        "cause": kind,
                        **(
                            {"changer_pid": b.cause.changer.pid}
                            if b.cause.changer is not None
                            else {}
                        ),
                    },
                )
                for b in items
            )
            out.append(
                Finding(
                    BYPASSED,
                    message,
                    evidence,
                    group=f"session {cov.session}",
                    key=f"{command}\0{kind}" + ("\0git" if git_itself else ""),
                    severity=severity,
                    count=len(items),
                )
            )
    return out


def _place_of(b: Bypassed) -> object:
    """What tells one bypass finding from another of the same command and cause: the
    process that changed PATH (or the parent); none for a program running itself, one fact
    per program whichever of its processes ran it."""
    if b.cause.kind == "itself":
        return None
    ch = b.cause.changer
    return (ch.boot, ch.pid, ch.start) if ch else (b.exec.boot, b.exec.ppid)


def _shell_line_by_path(b: Bypassed) -> bool:
    """A shell started by absolute path with a -c line: its line's finding says it ran past
    every shim (MCS401 traced, MCS105/106 sampled): one statement per process."""
    argv = b.exec.argv
    if b.source == "parent" or not argv or b"/" not in argv[0]:
        return False  # no rule reads a parent's line: the bypass is what is said of it
    return shell_options(argv)[2] is not None


def _git_itself(b: Bypassed) -> bool:
    path = os.fsdecode(b.exec.filename)
    return any(under(path, d) for d in GIT_EXEC_DIRS)
