"""What a text must hold for a text rule of the credential table (log.redact_rules) to
match, and the rule's patterns, compiled the first time a text may hold its match: the
quick check every writer makes before redacting anything (`quick`: the needles, one
trie-shaped pattern) and each rule's own (`Rule.cannot_match`: its scope, its anchor and
one of its spellings). Compiling every rule's patterns took 80 ms of every process that
redacted anything; most texts need none of them. log.redact applies them."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcpshim.log.redact_rules import RULES, SHELL_OPEN, Before, TextRule, glob_items

__all__ = ["PREFILTER_RUN", "Parts", "Rule", "char_class", "prefilter_len", "quick", "run_chars"]

PREFILTER_RUN = 3  # run characters a rule's quick check asks for (it is a superset)


def _rx(glob: str) -> bytes:
    out = []
    for chars in glob_items(glob):
        out.append(
            re.escape(chars) if len(chars) == 1 else "[" + "".join(map(re.escape, chars)) + "]"
        )
    return "".join(out).encode()


def char_class(chars: str, negate: bool) -> bytes:
    return ("[" + ("^" if negate else "") + "".join(map(re.escape, chars)) + "]").encode()


@dataclass(frozen=True)
class Parts:
    """A rule's patterns, compiled the first time a text might hold its match."""

    occ: re.Pattern[bytes]  # a head, the anchor, a tail
    pre: re.Pattern[bytes]  # ... and the start of a long enough run: without it, no hit
    heads: tuple[tuple[re.Pattern[bytes], int, Before], ...]
    tails: tuple[re.Pattern[bytes], ...]
    run: re.Pattern[bytes]
    not_first: bytes
    stops: frozenset[int]  # a shell word's stops outside quotes (rule.sh_word)


class Rule:
    """A text rule and what tells, before any pattern, that a text cannot hold its match:
    its scope words, its anchor, the spellings of its heads, anchor and tails (`needles`,
    lower case; None when there are too many to list). Compiling every rule's patterns
    took 80 ms of every process that redacted anything; most texts need none of them."""

    __slots__ = ("_parts", "anchor", "needles", "rule", "scope")

    def __init__(self, r: TextRule) -> None:
        self.rule = r
        self.anchor = r.anchor.encode()
        self.scope = tuple(w.encode() for w in r.scope)
        self.needles = _spelled(r)
        self._parts: Parts | None = None

    @property
    def parts(self) -> Parts:
        if self._parts is None:
            self._parts = _compile(self.rule)
        return self._parts

    def cannot_match(self, value: bytes, low: bytes) -> bool:
        """True when `value` (`low`: in lower case) holds no head, anchor and tail in a row:
        what the rule's every match starts with."""
        if self.scope and not any(w in value for w in self.scope):
            return True
        if self.anchor not in value:
            return True
        return self.needles is not None and not any(n in low for n in self.needles)


def _spelled(r: TextRule) -> tuple[bytes, ...] | None:
    out: set[str] = set()
    for h in r.heads:
        for t in r.tails:
            glob = h.glob + r.anchor + t
            if _spellings(glob) > _EXPAND_MAX:
                return None
            out.update(_expand(glob))
    return tuple(sorted({n.lower().encode() for n in out}))


def run_chars(r: TextRule) -> tuple[str, bool]:
    """(characters, negated): what a run's first characters may be. A shell word may start
    with a quote, which is a stop of the plain run (and may hold anything after it, so only
    its first character is known: see PREFILTER_RUN's use)."""
    if r.body:
        return r.body, False
    if r.sh_word:
        return "".join(c for c in r.stop if c not in SHELL_OPEN), True
    return r.stop, True


def prefilter_len(r: TextRule) -> int:
    """How many run characters a rule's quick check asks for."""
    return 1 if r.sh_word else min(r.min_len, PREFILTER_RUN)


def _compile(r: TextRule) -> Parts:
    ci = rb"(?i:%s)" if r.ci else b"(?:%s)"
    heads = ci % b"|".join(_rx(h.glob) for h in r.heads)
    tails = ci % b"|".join(_rx(t) for t in r.tails)
    run_cls = char_class(r.body or r.stop, negate=not r.body)
    chars, negated = run_chars(r)
    occ = heads + re.escape(r.anchor.encode()) + tails
    flags = re.IGNORECASE if r.ci else 0
    return Parts(
        re.compile(occ),
        re.compile(occ + char_class(chars, negated) + b"{%d}" % prefilter_len(r)),
        tuple((re.compile(_rx(h.glob), flags), len(glob_items(h.glob)), h.before) for h in r.heads),
        tuple(re.compile(_rx(t), flags) for t in r.tails),
        re.compile(run_cls + b"*"),
        r.not_first.encode(),
        frozenset(chars.encode()) if r.sh_word else frozenset(),
    )


_EXPAND_MAX = 64  # a head with more spellings than this is looked for by a pattern


def _needles() -> tuple[tuple[bytes, ...], re.Pattern[bytes] | None]:
    """Lower-case text one of which every rule's match holds (checked on value.lower()),
    and a pattern for the shapes with too many spellings to list (a discord token's head)."""
    out = {"token", "pass", "secret", "key", "bearer", "auth", "pwd", "pat", "cookie"}
    hard: list[bytes] = []
    for r in RULES:
        if isinstance(r, TextRule) and (r.body or r.min_len > 1):  # the token shapes
            for h in r.heads:
                for t in r.tails:
                    glob = h.glob + r.anchor + t
                    if _spellings(glob) <= _EXPAND_MAX:
                        out.update(_expand(glob))
                    else:
                        hard.append(_rx(glob))
        if isinstance(r, TextRule):
            out.update(r.scope)
    pattern = re.compile(b"|".join(hard)) if hard else None
    return tuple(sorted(n.lower().encode() for n in out)), pattern


def _spellings(glob: str) -> int:
    n = 1
    for chars in glob_items(glob):
        n *= len(chars)
    return n


def _expand(glob: str) -> list[str]:
    words = [""]
    for chars in glob_items(glob):
        words = [w + c for w in words for c in chars]
    return words


@functools.cache
def quick() -> tuple[re.Pattern[bytes], re.Pattern[bytes] | None]:
    """Any needle in one search, and the shapes with too many spellings; built on first
    use, not when a module imports this one (30 ms of glob expansion a process that never
    redacts never needs). The needles as a trie (`(?:pa(?:ss|t)|...)`): 158 `in` tests in
    Python took 12 times as long, a plain alternation 3 times."""
    needles, hard = _needles()
    return re.compile(_trie(needles)), hard


def _trie(words: Iterable[bytes]) -> bytes:
    """A pattern that finds any of `words`: one branch per shared prefix. A word that is a
    prefix of others ends its branch (any match of theirs holds it)."""
    root: dict[int, Any] = {}
    for w in words:
        node = root
        for c in w:
            node = node.setdefault(c, {})
        node[-1] = {}

    def branch(node: dict[int, Any]) -> bytes:
        if -1 in node:
            return b""
        alts = [re.escape(bytes([c])) + branch(sub) for c, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return branch(root)
