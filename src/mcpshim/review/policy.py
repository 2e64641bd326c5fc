"""The review policy: a TOML file read once into a frozen `Policy`, and how it filters findings.

Every key is documented in the top-level ``policy.example.toml``. A missing file means the
defaults; a malformed one is an `InputError` naming the file, the line and the key path.

Ignores match findings through their evidence: every producer of findings (review's rules,
lint-path) puts ``command`` (the command name, e.g. ``git``) and ``path`` (the executable,
directory or file the finding is about) into ``Evidence.data``. An ignore entry matches when
all of the keys it gives match: ``rule`` (an id), ``command`` (exact), ``path`` (a glob,
fnmatch-style, where ``*`` also crosses ``/``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from mcpshim.base.fdio import read_regular
from mcpshim.base.tomlfile import Keys, parse_toml
from mcpshim.errors import InputError
from mcpshim.review.findings import Finding, Severity
from mcpshim.shim import targets

__all__ = [
    "DEFAULT_SENSITIVE",
    "CommandPolicy",
    "FilesPolicy",
    "Ignore",
    "Policy",
    "apply_policy",
    "default_policy",
    "dumps_starter",
    "load_policy",
    "parse_policy",
]

DEFAULT_SENSITIVE = ("git", "ssh", "sh", "bash", "node", "npm", "npx", "python3", "curl")
_RULE_ID = re.compile(r"^MCS\d{3}$")
_LEVELS = ("info", "low", "medium", "high", "off")


@dataclass(frozen=True)
class Ignore:
    """Drop findings that match every key given (at least one key is required)."""

    rule: str | None = None
    command: str | None = None
    path: str | None = None
    reason: str = ""

    def covers(self, rule: str, path: str) -> bool:
        """It would drop a finding of `rule` about `path` (whatever its command)."""
        if self.rule not in (None, rule) or self.command is not None:
            return False
        return self.path is None or fnmatch.fnmatchcase(path, self.path)

    def matches(self, finding: Finding) -> bool:
        if self.rule is not None and finding.rule.id != self.rule:
            return False
        if self.command is None and self.path is None:
            return True
        for ev in finding.evidence or ():
            data = ev.data
            if self.command is not None and data.get("command") != self.command:
                continue
            if self.path is not None:
                p = data.get("path")
                if not isinstance(p, str) or not fnmatch.fnmatchcase(p, self.path):
                    continue
            return True
        return False


@dataclass(frozen=True)
class CommandPolicy:
    """What is expected of one command (by shim or executable name). Empty means any."""

    targets: tuple[str, ...] = ()  # absolute paths (globs) the command may resolve to
    subcommands: tuple[str, ...] = ()  # first non-option argument, e.g. status, diff
    args: tuple[str, ...] = ()  # argument shapes: globs over the space-joined arguments
    cwd_roots: tuple[str, ...] = ()  # directories the command may run in (and below)
    destinations: tuple[str, ...] = ()  # network destinations (host, host:port, globs)


@dataclass(frozen=True)
class FilesPolicy:
    """[files]: locations added to the table the tracer records (log.filetable), and the
    credential files a tool (or any tool: `read`) may read without a finding."""

    credentials: tuple[str, ...] = ()
    persistence: tuple[str, ...] = ()
    read: tuple[str, ...] = ()  # globs (~ expanded) any process may read
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # tool -> globs

    def allows_read(self, tool: str | None, path: str) -> bool:
        """Whether the policy lists this credential file for this tool (or for every one)."""
        globs = self.read + (self.tools.get(tool, ()) if tool else ())
        return any(fnmatch.fnmatchcase(path, g) for g in globs)


#: the default grades of observed destinations the policy does not list ([network])
NETWORK_GRADES: Mapping[str, Severity] = {
    "loopback": Severity.LOW, "unix": Severity.LOW, "remote": Severity.MEDIUM,
}  # fmt: skip


@dataclass(frozen=True)
class Policy:
    trusted_dirs: tuple[str, ...]
    temp_dirs: tuple[str, ...]
    sensitive_commands: tuple[str, ...]
    severity: Mapping[str, Severity] = field(default_factory=dict)
    ignores: tuple[Ignore, ...] = ()
    commands: Mapping[str, CommandPolicy] = field(default_factory=dict)
    cwd_roots: tuple[str, ...] = ()  # every command's allowed cwd roots (empty: any)
    destinations: tuple[str, ...] = ()  # network destinations expected for any helper
    strict_commands: bool = False  # a command without a [commands.X] table is a finding
    tools: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # MCP tool -> commands
    source: str = ""  # the file it came from ("" for defaults)
    #: how an observed connection to an unlisted destination is graded, by where it goes
    grades: Mapping[str, Severity] = field(default_factory=lambda: dict(NETWORK_GRADES))
    files: FilesPolicy = field(default_factory=FilesPolicy)

    def grade(self, scope: str | None) -> Severity:
        """The severity of an unlisted destination: loopback, unix, remote (any other)."""
        key = scope if scope in ("loopback", "unix") else "remote"
        return self.grades.get(key, NETWORK_GRADES[key])

    def ignored(self, rule: str, path: str) -> bool:
        """A finding of `rule` about `path` is ignored: the rule steps aside for the next
        (an ignored MCS102 for a checkout meant to be in /tmp still leaves MCS119)."""
        return any(ig.covers(rule, path) for ig in self.ignores)

    def command(self, name: str) -> CommandPolicy | None:
        return self.commands.get(name)

    def allowed_destinations(self, command: str) -> tuple[str, ...]:
        cp = self.commands.get(command)
        return self.destinations + (cp.destinations if cp else ())


def _default_trusted() -> tuple[str, ...]:
    dirs = list(targets.trusted_search_path())
    for extra in ("/usr/sbin", "/sbin"):
        if extra not in dirs:
            dirs.append(extra)
    return tuple(dirs)


def _default_temp() -> tuple[str, ...]:
    dirs = list(dict.fromkeys(targets.temp_dirs()))
    downloads = os.path.join(os.path.expanduser("~"), "Downloads")
    if downloads not in dirs:
        dirs.append(downloads)
    return tuple(dirs)


def default_policy() -> Policy:
    return Policy(
        trusted_dirs=_default_trusted(),
        temp_dirs=_default_temp(),
        sensitive_commands=DEFAULT_SENSITIVE,
    )


# ---- loading -----------------------------------------------------------------------------


def _strs(ctx: Keys, value: Any, keypath: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(keypath, "expected a list of strings")
    return tuple(value)


def _table(ctx: Keys, value: Any, keypath: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ctx.fail(keypath, "expected a table")
    return value


def _paths(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.expanduser(v) for v in values)


_COMMAND_KEYS = ("targets", "subcommands", "args", "cwd_roots", "destinations")
_TOP_KEYS = (
    "version",
    "trusted_dirs",
    "temp_dirs",
    "sensitive_commands",
    "cwd_roots",
    "strict_commands",
    "severity",
    "ignore",
    "commands",
    "network",
    "tools",
    "files",
)
_FILES_KEYS = ("credentials", "persistence", "read", "tools")


def _command(ctx: Keys, name: str, value: Any) -> CommandPolicy:
    prefix = f"commands.{name}."
    table = _table(ctx, value, f"commands.{name}")
    ctx.no_unknown(table, _COMMAND_KEYS, prefix)
    get = {k: _strs(ctx, table[k], prefix + k) for k in _COMMAND_KEYS if k in table}
    return CommandPolicy(
        targets=_paths(get.get("targets", ())),
        subcommands=get.get("subcommands", ()),
        args=get.get("args", ()),
        cwd_roots=_paths(get.get("cwd_roots", ())),
        destinations=get.get("destinations", ()),
    )


def _ignore(ctx: Keys, i: int, value: Any) -> Ignore:
    keypath = f"ignore[{i}]"
    table = _table(ctx, value, keypath)
    ctx.no_unknown(table, ("rule", "command", "path", "reason"), "ignore.")
    for k, v in table.items():
        if not isinstance(v, str):
            raise ctx.fail(f"ignore.{k}", f"expected a string in ignore entry {i + 1}")
    if not {"rule", "command", "path"} & set(table):
        raise ctx.fail("ignore", f"entry {i + 1} needs at least one of rule, command, path")
    rule = table.get("rule")
    if rule is not None and not _RULE_ID.match(rule):
        raise ctx.fail("ignore.rule", f"not a rule id: {rule!r} (like MCS101)")
    path = table.get("path")
    return Ignore(
        rule,
        table.get("command"),
        os.path.expanduser(path) if path else None,
        table.get("reason", ""),
    )


def _files(ctx: Keys, table: Mapping[str, Any]) -> FilesPolicy:
    ctx.no_unknown(table, _FILES_KEYS, "files.")
    get = {k: _strs(ctx, table[k], f"files.{k}") for k in _FILES_KEYS[:3] if k in table}
    tools = {
        name: _paths(_strs(ctx, v, f"files.tools.{name}"))
        for name, v in _table(ctx, table.get("tools", {}), "files.tools").items()
    }
    return FilesPolicy(get.get("credentials", ()), get.get("persistence", ()),
                       _paths(get.get("read", ())), tools)  # fmt: skip


def parse_policy(text: str, path: Path, known_rules: Collection[str] | None = None) -> Policy:
    """A Policy from TOML text; `path` only names the file in errors. With `known_rules`
    (the CLI passes every rule it has), a [severity] entry for any other id is an error:
    a typo there would silently change nothing."""
    ctx = Keys(path, text, "policy")
    data = parse_toml(text, path, "policy")
    ctx.no_unknown(data, _TOP_KEYS, "")
    version = data.get("version", 1)
    if version != 1:
        raise ctx.fail("version", f"unsupported policy version {version!r} (expected 1)")
    base = default_policy()
    severity: dict[str, Severity] = {}
    ignores: list[Ignore] = []
    for rid, level in _table(ctx, data.get("severity", {}), "severity").items():
        if not _RULE_ID.match(rid):
            raise ctx.fail(f"severity.{rid}", "not a rule id (like MCS101)")
        if known_rules is not None and rid not in known_rules:
            raise ctx.fail(f"severity.{rid}", "no such rule (`mcpshim rules` lists them)")
        if not isinstance(level, str) or level.lower() not in (
            "info",
            "low",
            "medium",
            "high",
            "off",
        ):
            raise ctx.fail(f"severity.{rid}", "expected one of info, low, medium, high, off")
        if level.lower() == "off":
            ignores.append(Ignore(rule=rid, reason="severity off"))
        else:
            severity[rid] = Severity[level.upper()]
    raw_ignores = data.get("ignore", [])
    if not isinstance(raw_ignores, list):
        raise ctx.fail("ignore", "expected an array of tables ([[ignore]])")
    ignores += [_ignore(ctx, i, v) for i, v in enumerate(raw_ignores)]
    commands = {
        name: _command(ctx, name, v)
        for name, v in _table(ctx, data.get("commands", {}), "commands").items()
    }
    network = _table(ctx, data.get("network", {}), "network")
    ctx.no_unknown(network, ("destinations", *NETWORK_GRADES), "network.")
    grades = dict(NETWORK_GRADES)
    for scope in NETWORK_GRADES:
        if scope in network:
            level = network[scope]
            if not isinstance(level, str) or level.upper() not in Severity.__members__:
                raise ctx.fail(f"network.{scope}", "expected one of info, low, medium, high")
            grades[scope] = Severity[level.upper()]
    tools = {
        name: _strs(ctx, v, f"tools.{name}")
        for name, v in _table(ctx, data.get("tools", {}), "tools").items()
    }
    files = _files(ctx, _table(ctx, data.get("files", {}), "files"))
    strict = data.get("strict_commands", False)
    if not isinstance(strict, bool):
        raise ctx.fail("strict_commands", "expected true or false")

    def dirs(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        return _paths(_strs(ctx, data[key], key)) if key in data else default

    return Policy(
        trusted_dirs=dirs("trusted_dirs", base.trusted_dirs),
        temp_dirs=dirs("temp_dirs", base.temp_dirs),
        sensitive_commands=dirs("sensitive_commands", base.sensitive_commands),
        severity=severity,
        ignores=tuple(ignores),
        commands=commands,
        cwd_roots=dirs("cwd_roots", ()),
        destinations=_strs(ctx, network["destinations"], "network.destinations")
        if "destinations" in network
        else (),
        strict_commands=strict,
        tools=tools,
        source=str(path),
        grades=grades,
        files=files,
    )


def load_policy(path: Path | None, known_rules: Collection[str] | None = None) -> Policy:
    """The policy in `path`, or the defaults when None."""
    if path is None:
        return default_policy()
    try:
        text = read_regular(path).decode("utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read policy: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: policy is not UTF-8 text") from None
    return parse_policy(text, path, known_rules)


def apply_policy(findings: Iterable[Finding], policy: Policy) -> list[Finding]:
    """Drop ignored findings and apply severity overrides, in that order."""
    out: list[Finding] = []
    for f in findings:
        if any(ig.matches(f) for ig in policy.ignores):
            continue
        level = policy.severity.get(f.rule.id)
        out.append(f.with_severity(level) if level is not None else f)
    return out


# ---- starter -----------------------------------------------------------------------------


def starter_dict() -> dict[str, Any]:
    """The starter `policy init` writes: today's defaults made explicit, nothing allowed
    yet and nothing narrowed (a review with it finds what the default review finds; the
    [commands.NAME] example stays a comment)."""
    base = default_policy()
    return {
        "version": 1,
        "trusted_dirs": list(base.trusted_dirs),
        "temp_dirs": [_tilde(d) for d in base.temp_dirs],
        "sensitive_commands": list(base.sensitive_commands),
        "cwd_roots": [],
        "strict_commands": False,
        "severity": {},
        "network": {"destinations": [], **{k: v.label for k, v in NETWORK_GRADES.items()}},
        "commands": {},
        "ignore": [],
    }


def _tilde(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + "/") else path


_STARTER_NOTES = {
    "version": "Format version of this file. Only 1 exists.",
    "trusted_dirs": "Directories whose executables are trusted; an executable run from anywhere "
    "else is MCS119 (low). lint-path uses the same list. Giving the key replaces the default.",
    "temp_dirs": "Temporary and download directories: an executable run from inside one is "
    "MCS102 (high); a working directory inside one is MCS104 (low).",
    "sensitive_commands": "Commands whose PATH lookup matters most: lint-path reports a "
    "directory that would shadow one of these.",
    "cwd_roots": "Working directories every command may run in (and below); empty allows any, "
    "else a cwd outside them is MCS114 (medium).",
    "strict_commands": "true: a command with no [commands.NAME] table is MCS118 (medium).",
    "ignore": "Ignores: [[ignore]] tables, each dropping the findings that match every key "
    "given: rule (an id), command, path (a glob), reason (free text). Example:\n"
    '[[ignore]]\nrule = "MCS104"\npath = "/tmp/ci-workspace/*"\nreason = "CI checks out '
    'there on purpose"',
    "severity": "Severity overrides by rule id (`mcpshim rules` lists them): info, low, medium, "
    'high, or off (drops the rule\'s findings). Example:\nMCS106 = "info"',
    "network": "Network destinations any process may contact (host or host:port globs, a "
    "Unix socket's path); one that matches none is MCS108 (from a helper's arguments) or, "
    "observed by the tracer, MCS306, graded by where it goes: loopback, unix, remote.",
    "commands": "One table per command (shim name or executable base name); every key is "
    "optional, an empty or missing list means anything:\n  targets      absolute paths "
    "(globs) it may resolve to, else MCS112\n  subcommands  allowed first operands, else "
    "MCS113\n  args         ...unless the arguments, joined by spaces, match one of these "
    "globs\n  cwd_roots    where it may run, else MCS114\n  destinations added to "
    "[network] destinations for it\nNone is set here (each would narrow what the default "
    'review allows). Example:\n[commands.git]\ntargets = ["/usr/bin/git"]\nsubcommands = '
    '["status", "diff", "log", "show", "rev-parse", "--version"]',
}


def _comment(key: str) -> str:
    """The note on a key as TOML comment lines of at most 92 characters."""
    out: list[str] = []
    for para in _STARTER_NOTES[key].split("\n"):
        line = "#"
        for word in para.split(" ") if not para.startswith("  ") else [para]:
            if len(line) + 1 + len(word) > 92 and line != "#":
                out.append(line)
                line = "#"
            line += " " + word
        out.append(line)
    return "\n".join(out) + "\n"


def dumps_starter() -> str:
    """The starter, each key with a comment saying what it does (nothing points at a file a
    pip install does not have)."""
    data = starter_dict()
    out = [
        "# mcpshim review policy, written by `mcpshim policy init`: today's defaults made\n"
        "# explicit, nothing allowed yet. Use it with `mcpshim review --policy FILE`. Every key\n"
        "# is optional (a key left out keeps the default); a malformed file is an error naming\n"
        "# the line and the key. Paths may start with ~; globs are fnmatch-style.\n"
    ]
    for key in ("version", "trusted_dirs", "temp_dirs", "sensitive_commands", "cwd_roots",
                "strict_commands"):  # fmt: skip
        out.append("\n" + _comment(key) + tomli_w.dumps({key: data[key]}))
    for key in ("severity", "network", "commands"):
        out.append("\n" + _comment(key) + tomli_w.dumps({key: data[key]}).lstrip("\n"))
    out.append(
        "\n# MCP tool name -> the commands a call of it is expected to start (run --mcp):\n"
        '# [tools]\n# run_tests = ["npm", "node", "sh"]\n\n' + _comment("ignore")
    )
    return "".join(out)
