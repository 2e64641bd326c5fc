"""wrap-config: put MCP client config entries under `mcpshim run` with the shim dir first.

The file is edited surgically at the spans the parser located (command value, the start of
args, env.PATH), so every other byte, comments included, stays as the user wrote it. Each
edit is checked by parsing the result again: the values must be exactly the old ones with
the intended changes, and every comment must still be there; otherwise nothing is written.
The first wrap keeps the original bytes in FILE.mcpshim-backup; --undo puts them back.
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

from mcpshim.base import safewrite
from mcpshim.base.display import escape
from mcpshim.errors import InputError, UsageError
from mcpshim.log import redact
from mcpshim.pathcheck import jsonc
from mcpshim.pathcheck.clientconfig import McpConfig, ServerEntry, parse_config

__all__ = [
    "BACKUP_SUFFIX",
    "WrapPlan",
    "apply_plan",
    "backup_path",
    "is_wrapped",
    "plan_undo",
    "plan_wrap",
    "relays_mcp",
    "render_diff",
    "run_prefix",
    "undo",
    "unwrapped",
]

BACKUP_SUFFIX = ".mcpshim-backup"


@dataclass(frozen=True)
class WrapPlan:
    path: Path
    original: bytes
    new: bytes
    wrapped: tuple[str, ...]  # entries rewritten now
    already: tuple[str, ...]  # entries that were already wrapped (left as they are)
    skipped: Mapping[str, str]  # entries that cannot be wrapped, and why

    @property
    def changed(self) -> bool:
        return self.new != self.original


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


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
        text = self.text
        order = sorted(enumerate(self.edits), key=lambda e: (e[1][0], e[0]), reverse=True)
        for _, (start, end, new) in order:
            text = text[:start] + new + text[end:]
        return text


def _new_path(server: ServerEntry, shim_dir: str, inherited: str) -> str | None:
    """The env.PATH to write, or None when the shim dir is already first."""
    current = server.env.get("PATH")
    base = inherited if current is None else current
    if base == shim_dir or base.startswith(shim_dir + ":"):
        return None
    return f"{shim_dir}:{base}" if base else shim_dir


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


def _verify(config: McpConfig, new_text: str, expected_root: Any) -> None:
    """Refuse unless the edited text holds exactly the intended values and every comment."""
    try:
        doc = jsonc.parse(new_text)
    except jsonc.JsoncError as exc:
        msg = f"{config.path}: refusing to write: the edit would not parse ({exc})"
        raise InputError(msg) from None
    if doc.root.value != expected_root:
        raise InputError(f"{config.path}: refusing to write: the edit would change other values")
    old = [c.text for c in config.document.comments]
    if [c.text for c in doc.comments] != old:
        raise InputError(f"{config.path}: refusing to write: the edit would drop or move comments")
    if config.document.plain_json and json.loads(new_text) != expected_root:
        raise InputError(f"{config.path}: refusing to write: the result is not plain JSON")


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
    if new_text != config.document.text:
        _verify(config, new_text, expected)
    new = new_text.encode("utf-8") if new_text != config.document.text else config.raw
    return WrapPlan(config.path, config.raw, new, tuple(wrapped), tuple(already), skipped)


# ---- backup, atomic writes, undo ------------------------------------------------------------


def _strip(entry: Any) -> Any:
    """An entry as it was before wrapping (PATH aside, which wrapping sets)."""
    if not isinstance(entry, dict):
        return entry
    e = copy.deepcopy(entry)
    args = e.get("args") or []
    if is_wrapped(e.get("command"), args):
        e["command"], e["args"] = unwrapped(args)
    env = e.get("env") or {}
    env.pop("PATH", None)
    e["env"] = env
    e["args"] = e.get("args") or []
    return e


def derived_from(original: bytes, current: McpConfig) -> bool:
    """Whether the current file is the backed-up original with some entries wrapped."""
    try:
        before = parse_config(current.path, original)
    except InputError:
        return False
    a, b = before.document.root.value, current.document.root.value
    if {k: v for k, v in a.items() if k != before.servers_key} != {
        k: v for k, v in b.items() if k != current.servers_key
    }:
        return False
    sa, sb = a.get(before.servers_key, {}), b.get(current.servers_key, {})
    if sa.keys() != sb.keys():
        return False
    for name, entry in sb.items():
        was = sa[name]
        if entry == was:
            continue
        if not isinstance(entry, dict) or not is_wrapped(
            entry.get("command"), entry.get("args", [])
        ):
            return False
        if _strip(entry) != _strip(was):
            return False
    return True


def apply_plan(plan: WrapPlan, config: McpConfig) -> Path | None:
    """Write the backup (first time only) and the new file; return the backup's path."""
    if not plan.changed:
        return None
    backup = backup_path(plan.path)
    st = os.stat(plan.path)
    if backup.exists():
        held = backup.read_bytes()
        if held != plan.original and not derived_from(held, config):
            raise InputError(
                f"{backup} already holds a different original, and {plan.path} is not that "
                "original with entries wrapped; refusing to overwrite the backup. Run "
                "`mcpshim wrap-config --undo` or move the backup away first."
            )
    else:
        try:
            safewrite.create_exclusive(backup, plan.original, st)
        except FileExistsError:
            raise InputError(f"{backup} appeared while wrapping; run the command again") from None
    safewrite.replace_atomically(plan.path, plan.new, st)
    return backup


def plan_undo(config: McpConfig) -> bytes:
    """The original bytes --undo would restore (checked against the current file)."""
    backup = backup_path(config.path)
    try:
        original = backup.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{backup}: no backup, so nothing to undo") from None
    if original != config.raw and not derived_from(original, config):
        raise InputError(
            f"{config.path} changed beyond the wrapping since {backup} was written; "
            f"refusing to overwrite those changes. To restore the original anyway: "
            f"mv {backup} {config.path}"
        )
    return original


def undo(config: McpConfig) -> bytes:
    original = plan_undo(config)
    safewrite.replace_atomically(config.path, original, os.stat(config.path))
    os.unlink(backup_path(config.path))
    return original


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
