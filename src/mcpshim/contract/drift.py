"""A tool's drift from its approved definition, as a reviewer reads it.

A hash says that a definition changed, not what: this says it line by line, in the finding
of a drift (MCS520) and on the tool's approval card. The description (and title) as a diff
of its lines and of its words (added, removed, or the same words in another order); each
input and output schema field: a parameter added or removed, a required one, a type, an
enum or any other key changed; each annotation. `Drift.reordered` is what the grade rests
on (contract.canon.order_hash): the same words and list items in another order.

Values are shown as JSON, cut at a length a terminal line holds; the caller escapes them
for its output (base.display). A text is compared over its first DIFF_MAX characters only
(difflib is quadratic at worst, and a 10 MB description took 25 s): past them a drift says
that the texts differ further on, not how.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpshim.contract.canon import canonical, order_free

__all__ = ["DIFF_MAX", "Drift", "drift", "line_diff", "lock_definition", "parse_lock_definition"]

DIFF_MAX = 64 << 10  # characters of a text compared word by word and line by line
_SHOWN = 160  # characters of a value shown
_WORDS = re.compile(r"[^\W_]+(?:[_'.+/-][^\W_]+)*|\S")
_SCHEMAS = ("inputSchema", "outputSchema")
_LISTED = ("title", "description", *_SCHEMAS, "annotations")


@dataclass(frozen=True)
class Drift:
    lines: tuple[str, ...]  # the readable diff
    reordered: bool  # only the order of the same words and list items changed
    added: tuple[str, ...]  # what the new definition has that the approved one lacks


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _words(text: str) -> Counter[str]:
    return Counter(_WORDS.findall(text))


def line_diff(old: str, new: str, hunks: bool = False) -> list[str]:
    """The unified diff of two texts' lines (no file header; `hunks`: with its @@ lines),
    of their first DIFF_MAX characters; a last line says when they differ past them."""
    a, b = old[:DIFF_MAX].splitlines(), new[:DIFF_MAX].splitlines()
    body = difflib.unified_diff(a, b, "approved", "now", lineterm="", n=1)
    out = [line for line in list(body)[2:] if hunks or not line.startswith("@@")]
    if old[DIFF_MAX:] != new[DIFF_MAX:]:
        out.append(f"(the texts differ past their first {DIFF_MAX} characters: not compared)")
    return out


def _text(label: str, old: str, new: str, out: list[str], added: list[str]) -> None:
    if old == new:
        return
    full = old, new
    old, new = old[:DIFF_MAX], new[:DIFF_MAX]
    a, b = _words(old), _words(new)
    plus = sorted(w for w in (b - a).elements() if w[0].isalnum())
    minus = sorted(w for w in (a - b).elements() if w[0].isalnum())
    if a == b and old != new:
        out.append(f"{label}: the same words, in another order")
    if plus:
        out.append(f"{label}: words added: {' '.join(plus)}"[:300])
        added.append(f"{label} words {' '.join(plus)}"[:120])
    if minus:
        out.append(f"{label}: words removed: {' '.join(minus)}"[:300])
    out += line_diff(*full)


def _values(label: str, old: Any, new: Any, out: list[str], added: list[str]) -> None:
    """Any JSON value against another, key by key; lists as sets of items."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            path = f"{label}.{k}"
            if k not in old:
                out.append(f"+ {path} = {_show(new[k])}")
                added.append(path)
            elif k not in new:
                out.append(f"- {path} = {_show(old[k])}")
            elif k in ("description", "title") and isinstance(old[k], str):
                if isinstance(new[k], str):
                    _text(path, old[k], new[k], out, added)
                else:
                    out.append(f"~ {path}: {_show(old[k])} -> {_show(new[k])}")
            else:
                _values(path, old[k], new[k], out, added)
        return
    if isinstance(old, list) and isinstance(new, list):
        a = Counter(canonical(v) for v in old)
        b = Counter(canonical(v) for v in new)
        if a == b:
            out.append(f"~ {label}: the same items, in another order")
            return
        for item in sorted((b - a).elements()):
            out.append(f"+ {label}[] {item.decode('utf-8', 'surrogatepass')}"[:300])
            added.append(f"{label}[]")
        for item in sorted((a - b).elements()):
            out.append(f"- {label}[] {item.decode('utf-8', 'surrogatepass')}"[:300])
        return
    out.append(f"~ {label}: {_show(old)} -> {_show(new)}")
    added.append(label)


def _schema(label: str, old: Any, new: Any, out: list[str], added: list[str]) -> None:
    """A JSON schema: its parameters (`properties`) and `required` first, by name."""
    if old == new:
        return
    if not (isinstance(old, dict) and isinstance(new, dict)):
        _values(label, old, new, out, added)
        return
    props_a, props_b = old.get("properties"), new.get("properties")
    if isinstance(props_a, dict) and isinstance(props_b, dict):
        for name in sorted(set(props_a) | set(props_b)):
            if name not in props_a:
                p = props_b[name]
                kind = p.get("type", "?") if isinstance(p, dict) else "?"
                out.append(f"+ {label} parameter {name} ({_show(kind)}): {_show(p)}")
                added.append(f"parameter {name}")
            elif name not in props_b:
                out.append(f"- {label} parameter {name}")
            else:
                _values(f"{label} parameter {name}", props_a[name], props_b[name], out, added)
        old = {k: v for k, v in old.items() if k != "properties"}
        new = {k: v for k, v in new.items() if k != "properties"}
    req_a, req_b = old.get("required"), new.get("required")
    if isinstance(req_a, list) and isinstance(req_b, list):
        for name in sorted(set(map(str, req_b)) - set(map(str, req_a))):
            out.append(f"+ {label} required {name}")
            added.append(f"required {name}")
        for name in sorted(set(map(str, req_a)) - set(map(str, req_b))):
            out.append(f"- {label} required {name}")
        if set(map(str, req_a)) == set(map(str, req_b)) and req_a != req_b:
            out.append(f"~ {label} required: the same names, in another order")
        old = {k: v for k, v in old.items() if k != "required"}
        new = {k: v for k, v in new.items() if k != "required"}
    _values(label, old, new, out, added)


def drift(old: Mapping[str, Any], new: Mapping[str, Any]) -> Drift:
    """How `new` (a tool's definition as listed now) differs from `old` (as approved)."""
    out: list[str] = []
    added: list[str] = []
    for key in ("title", "description"):
        a, b = old.get(key, ""), new.get(key, "")
        if isinstance(a, str) and isinstance(b, str):
            _text(key, a, b, out, added)
        else:
            _values(key, a, b, out, added)
    for key in _SCHEMAS:
        _schema(key, old.get(key), new.get(key), out, added)
    _values("annotations", old.get("annotations") or {}, new.get("annotations") or {}, out, added)
    for key in sorted((set(old) | set(new)) - {"name", *_LISTED}):
        _values(key, old.get(key), new.get(key), out, added)
    reordered = old != new and order_free(dict(old)) == order_free(dict(new))
    return Drift(tuple(out), reordered, tuple(dict.fromkeys(added)))


def lock_definition(shown: Mapping[str, Any]) -> str:
    """What a lock keeps of a tool's definition besides its name and description (which it
    keeps as text): the rest, as canonical JSON, so a later drift can be diffed field by
    field. "" when there is nothing else."""
    rest = {k: v for k, v in shown.items() if k not in ("name", "description")}
    return canonical(rest).decode("utf-8", "surrogatepass") if rest else ""


def parse_lock_definition(text: str, name: str, description: str) -> dict[str, Any]:
    """The approved definition back from a lock's `definition` and `description`."""
    try:
        rest = json.loads(text) if text else {}
    except ValueError:
        rest = {}
    out: dict[str, Any] = {"name": name, **(rest if isinstance(rest, dict) else {})}
    if description:
        out["description"] = description
    return out
