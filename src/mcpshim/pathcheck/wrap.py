"""wrap-config: put MCP client config entries under `mcpshim run` with the shim dir first.

The file is edited surgically at the spans the parser located (command value, the start of
args, env.PATH), so every other byte, comments included, stays as the user wrote it. Each
edit is checked by parsing the result again: the values must be exactly the old ones with
the intended changes, and every comment must still be there; otherwise nothing is written.
Writing the result (lock, backup, atomic replace, undo) is `wrapfile`'s.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpshim.base.display import escape
from mcpshim.errors import InputError, UsageError
from mcpshim.log import redact
from mcpshim.pathcheck import jsonc
from mcpshim.pathcheck.clientconfig import McpConfig, ServerEntry, parse_config

__all__ = [
    "WrapPlan",
    "is_wrapped",
    "plan_wrap",
    "relays_mcp",
    "render_diff",
    "run_prefix",
    "unwrapped",
]


@dataclass(frozen=True)
class WrapPlan:
    path: Path
    original: bytes
    new: bytes
    wrapped: tuple[str, ...]  # entries rewritten now
    already: tuple[str, ...]  # entries that were already wrapped (left as they are)
    skipped: Mapping[str, str]  # entries that cannot be wrapped, and why
    after: McpConfig  # the new bytes, parsed

    @property
    def changed(self) -> bool:
        return self.new != self.original


def is_wrapped(command: str | None, args: Sequence[str]) -> bool:
    """`mcpshim run [options] -- original...` with an original command after the `--`."""
    return (
        command is not None
        and os.path.basename(command).startswith("mcpshim")
        and list(args[:1]) == ["run"]
        and "--" in args
        and args.index("--") + 1 < len(args)
    )


def relays_mcp(args: Sequence[str]) -> bool:
    """A wrapped entry's `run` has --mcp (among its options, before `--`): its tool calls
    are recorded, not only its execs."""
    options = list(args)
    return "--mcp" in options[: options.index("--")] if "--" in options else False


def unwrapped(args: Sequence[str]) -> tuple[str, list[str]]:
    """The original command and arguments of a wrapped entry's args."""
    i = list(args).index("--")
    return args[i + 1], list(args[i + 2 :])


def run_prefix(shim_dir: str, explicit_dir: bool, mcp: bool = True) -> list[str]:
    """`run --mcp --` (a wrapped entry is a stdio MCP server: its tool calls are relayed and
    recorded), naming the shim dir when it is not the default one run would use anyway."""
    return (
        ["run"]
        + (["--mcp"] if mcp else [])
        + (["--dir", shim_dir] if explicit_dir else [])
        + ["--"]
    )


def _json(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"cannot write {value!r} into a JSON file: not UTF-8") from None
    return json.dumps(value, ensure_ascii=False)


_REST_OF_LINE = re.compile(r"[ \t]*(,?)[ \t]*(?://[^\r\n]*|/\*[^\r\n]*?\*/)?[ \t]*$")


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent(text: str, offset: int) -> str | None:
    """The whitespace before `offset` on its line, or None if something else precedes it."""
    lead = text[_line_start(text, offset) : offset]
    return lead if lead.strip() == "" else None


def _line_indent(text: str, offset: int) -> str:
    start = _line_start(text, offset)
    m = re.match(r"[ \t]*", text[start:])
    return m.group() if m else ""


class _Editor:
    def __init__(self, config: McpConfig) -> None:
        self.text = config.document.text
        self.nl = "\r\n" if "\r\n" in self.text else "\n"
        self.edits: list[tuple[int, int, str]] = []

    def replace(self, node: jsonc.Node, new: str) -> None:
        self.edits.append((node.start, node.end, new))

    def insert(self, offset: int, new: str) -> None:
        self.edits.append((offset, offset, new))

    def sep_before(self, offset: int) -> str:
        ind = _indent(self.text, offset)
        return self.nl + ind if ind is not None else " "

    def unit(self, obj: jsonc.Node) -> str:
        outer = _line_indent(self.text, obj.start)
        for m in obj.members:
            ind = _indent(self.text, m.key_start)
            if ind is not None and ind.startswith(outer) and len(ind) > len(outer):
                return ind[len(outer) :]
        return "  "

    def after_member(self, m: jsonc.Member, member: str) -> None:
        """Insert a member after `m`, on a line of its own when `m` has one.

        A comment that ends m's line stays on m's line, where the user put it.
        """
        ind = _indent(self.text, m.key_start)
        eol = self.text.find("\n", m.value.end)
        eol = len(self.text) if eol < 0 else eol
        if eol > 0 and self.text[eol - 1] == "\r":
            eol -= 1
        rest = _REST_OF_LINE.match(self.text, m.value.end, eol)
        if ind is None or rest is None:
            self.insert(m.value.end, "," + self.sep_before(m.key_start) + member)
        elif rest.group(1):  # m already has its comma: the new member takes one too
            self.insert(eol, self.nl + ind + member + ",")
        else:
            self.insert(m.value.end, ",")
            self.insert(eol, self.nl + ind + member)

    def add_member(self, obj: jsonc.Node, key: str, value: str) -> None:
        """Add `"key": value` as the object's last member, formatted like its neighbours."""
        member = f"{_json(key)}: {value}"
        if obj.members:
            self.after_member(obj.members[-1], member)
        else:
            self.insert(obj.start + 1, member)

    def object_text(self, key: str, value: str, like: jsonc.Node, anchor: int) -> str:
        """A one-member object, laid out like `like` (multi-line when its members are)."""
        ind = _indent(self.text, anchor)
        if ind is None:
            return "{" + f"{_json(key)}: {value}" + "}"
        unit = self.unit(like)
        return "{" + self.nl + ind + unit + f"{_json(key)}: {value}" + self.nl + ind + "}"

    def result(self) -> str:
        """The text with every edit made, in one pass (inserts at one offset in the order
        they were made): linear in the file, however many servers are wrapped."""
        order = sorted(enumerate(self.edits), key=lambda e: (e[1][0], e[0]))
        out: list[str] = []
        done = 0
        for _, (start, end, new) in order:
            if start < done:
                raise AssertionError("overlapping edits")
            out += [self.text[done:start], new]
            done = end
        out.append(self.text[done:])
        return "".join(out)


def _new_path(server: ServerEntry, shim_dir: str, inherited: str) -> str | None:
    """The env.PATH to write, or None when the shim dir is already first."""
    current = server.env.get("PATH")
    base = inherited if current is None else current
    if base == shim_dir or base.startswith(shim_dir + ":"):
        return None
    if not base:
        return shim_dir
    # deduplicated, the shim dir moved first; what else the entry said (even an empty
    # entry) is the user's to keep, and lint-path's to flag
    rest = [e for e in base.split(":") if e.rstrip("/") != shim_dir.rstrip("/")]
    return ":".join([shim_dir, *dict.fromkeys(rest)])


def _wrap_entry(
    ed: _Editor,
    s: ServerEntry,
    exe: str,
    prefix: list[str],
    new_path: str | None,
    expected: dict[str, Any],
) -> None:
    node = s.node
    if not is_wrapped(s.command, s.args):
        cmd = node.member("command")
        assert cmd is not None and s.command is not None
        ed.replace(cmd.value, _json(exe))
        head = ", ".join(_json(a) for a in (*prefix, s.command))
        args = node.get("args")
        if args is None:
            ed.after_member(cmd, f'"args": [{head}]')
        elif args.items:
            first = args.items[0]
            ed.insert(first.start, head + "," + ed.sep_before(first.start))
        else:
            ed.insert(args.start + 1, head)
        expected["command"] = exe
        expected["args"] = [*prefix, s.command, *s.args]
    if new_path is not None:
        env = node.get("env")
        if env is None:
            last = node.members[-1]
            ed.add_member(
                node, "env", ed.object_text("PATH", _json(new_path), node, last.key_start)
            )
        else:
            path_member = env.member("PATH")
            if path_member is not None:
                ed.replace(path_member.value, _json(new_path))
            else:
                ed.add_member(env, "PATH", _json(new_path))
        expected.setdefault("env", {})["PATH"] = new_path


def _verify(config: McpConfig, new_text: str, expected_root: Any) -> McpConfig:
    """Refuse unless the edited text holds exactly the intended values and every comment;
    return it parsed."""
    try:
        after = parse_config(config.path, new_text.encode("utf-8"))
    except InputError as exc:
        msg = f"{config.path}: refusing to write: the edit would not parse ({exc})"
        raise InputError(msg) from None
    doc = after.document
    if doc.root.value != expected_root:
        raise InputError(f"{config.path}: refusing to write: the edit would change other values")
    old = [c.text for c in config.document.comments]
    if [c.text for c in doc.comments] != old:
        raise InputError(f"{config.path}: refusing to write: the edit would drop or move comments")
    # (a BOM the file started with is kept; json.loads alone would refuse it)
    if config.document.plain_json and json.loads(new_text.removeprefix("\ufeff")) != expected_root:
        raise InputError(f"{config.path}: refusing to write: the result is not plain JSON")
    return after


def plan_wrap(
    config: McpConfig,
    names: Sequence[str] | None,
    shim_dir: str,
    exe: str,
    inherited_path: str,
    explicit_dir: bool = False,
    mcp: bool = True,
) -> WrapPlan:
    """What wrapping the named servers (None: all) would write; nothing is written here."""
    if not os.path.isabs(exe) or not os.path.isabs(shim_dir):
        raise UsageError("the mcpshim executable and the shim dir must be absolute paths")
    if names is None:
        chosen = list(config.servers)
    else:
        chosen = [config.server(n) for n in dict.fromkeys(names)]
    ed = _Editor(config)
    expected = copy.deepcopy(config.document.root.value)
    entries = expected[config.servers_key]
    wrapped, already, skipped = [], [], {}
    for s in chosen:
        if not s.stdio:
            skipped[s.name] = "not a stdio server (it has no command), nothing runs locally"
            continue
        new_path = _new_path(s, shim_dir, inherited_path)
        if is_wrapped(s.command, s.args) and new_path is None:
            already.append(s.name)
            continue
        prefix = run_prefix(shim_dir, explicit_dir, mcp)
        _wrap_entry(ed, s, exe, prefix, new_path, entries[s.name])
        wrapped.append(s.name)
    if names is not None and skipped and not wrapped and not already:
        raise UsageError("; ".join(f"{k}: {v}" for k, v in skipped.items()))
    new_text = ed.result()
    after = config
    if new_text != config.document.text:
        after = _verify(config, new_text, expected)
    return WrapPlan(
        config.path, config.raw, after.raw, tuple(wrapped), tuple(already), skipped, after
    )


_CRED_MEMBER = re.compile(r'"((?:[^"\\]|\\.)*)"(\s*:\s*)"((?:[^"\\]|\\.)*)"')


def _redact_line(line: str) -> str:
    def member(m: re.Match[str]) -> str:
        if redact.is_credential_key(m.group(1)) and m.group(3) and "${" not in m.group(3):
            return f'"{m.group(1)}"{m.group(2)}"[REDACTED:credential-name]"'
        return m.group(0)

    line = _CRED_MEMBER.sub(member, line)
    out = redact.redact_text(line.encode("utf-8", "surrogateescape"))
    return out.decode("utf-8", "surrogateescape")


def render_diff(path: Path, old: bytes, new: bytes, label: str) -> str:
    """A unified diff for the terminal: credentials redacted, control characters escaped."""
    a = old.decode("utf-8", "surrogateescape").splitlines()
    b = new.decode("utf-8", "surrogateescape").splitlines()
    lines = difflib.unified_diff(a, b, f"{path}", f"{path} ({label})", lineterm="")
    return "".join(escape(_redact_line(line)) + "\n" for line in lines)
