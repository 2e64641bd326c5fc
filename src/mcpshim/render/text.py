"""Text for a reader at a terminal: findings by family, and a pstree-like process forest.

Everything that came from a process goes through display.escape/quote_argv, so a crafted
argument cannot move the cursor or fake a line.

The forest is printed straight from its columns (family.compact), whoever built it, by one
printer: a shim image read as a row is printed without becoming an `Image` (its text after
the time stamp made once per command line, a stamp's date and time to the second once per
second), any other image by `_image_text`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

from mcpshim.base.display import escape, quote_arg, quote_argv, safe
from mcpshim.family.compact import _WIDE, Columns
from mcpshim.family.netfacts import NetFacts
from mcpshim.family.tree import Forest, Image
from mcpshim.family.view import argv_of, fork_words, parent_line, stamp
from mcpshim.log.boot import MAX_SECONDS
from mcpshim.log.logview import cwd_text
from mcpshim.render.report import Report, coverage_lines, sorted_findings
from mcpshim.review.findings import Finding, Severity, finding_json
from mcpshim.review.verdicts import CallVerdict

__all__ = [
    "iter_tree_text",
    "render_findings_text",
    "render_tree_text",
    "stamp_of_seconds",
    "write_tree_text",
]


def _call_block(v: CallVerdict) -> list[str]:
    """The article's questions for one call, each answered in a line."""
    status = {True: "error", False: "ok", None: "no answer"}[v.is_error]
    lines = [f"   answered: {status}"]
    if v.ran:
        ran = "; ".join(v.ran)
    elif v.may_have_run:  # never "nothing": it may have run what overlapping calls did
        ran = "not known which (it overlapped other calls)"
    else:
        ran = "nothing"
    lines.append(f"   ran: {safe(ran)}")
    lines += [f"   filed by evidence: {safe(why)}" for why in v.filed_by_evidence]
    if v.may_have_run:
        lines.append(f"   may have run: {safe('; '.join(v.may_have_run))}")
    if v.where:
        lines.append(f"   from: {escape(', '.join(v.where))}")
    maybe = dict(v.maybe)
    for key, question, yes in v.answers:
        if yes:
            answer = "YES: " + " | ".join(yes)
        elif key in maybe:
            answer = "maybe (if it ran one of them): " + " | ".join(maybe[key])
        else:
            answer = "no"
        lines.append(f"   {question}: {safe(answer)}")
    return lines


def _finding_lines(f: Finding, limit: int | None) -> list[str]:
    # Messages and evidence hold argv already quoted by display.quote_argv: escaping
    # again would double its backslashes; safe() still escapes any control character.
    d = _head(f)
    lines = [
        f"  [{d['severity'].upper()}] {d['rule']} {d['name']} ({d['confidence']}): "
        f"{safe(d['message'])}"
    ]
    shown = f.evidence if limit is None else f.evidence[:limit]
    for ev in shown:
        lines.append(f"      {escape(ev.where)}: {safe(ev.text)}")
    rest = len(f.evidence) - len(shown)
    if rest:
        lines.append(f"      ... {rest} more (--evidence all)")
    elif f.evidence and f.count > len(f.evidence):  # none kept: nothing was left out
        lines.append(f"      ... {f.count - len(f.evidence)} more occurrence(s) not kept")
    lines.append(f"      fix: {safe(f.rule.remediation)}")
    return lines


def _head(f: Finding) -> dict[str, Any]:
    return finding_json(f, evidence=False)


def _routine(infos: list[Finding]) -> list[str]:
    """Info findings of a group in one line: routine events are counted, not listed."""
    if not infos:
        return []
    parts = [f"{d['rule']} {d['message']}" for d in map(_head, infos)]
    return [f"  routine (info): {safe('; '.join(parts))}"]


def render_findings_text(report: Report) -> str:
    lines: list[str] = []
    for k, v in report.subject.items():
        lines.append(f"{k}: {escape(str(v))}")
    for label, text in coverage_lines(report.coverage or ()):
        lines.append(f"{label}: {escape(text)}")
    for note in report.notes:
        lines.append(f"note: {escape(note)}")
    if lines:
        lines.append("")
    by_group: dict[str, list[Finding]] = {}
    for f in sorted_findings(report.findings):
        by_group.setdefault(f.group, []).append(f)
    verdicts = {v.group: v for v in report.calls}
    for group in sorted(set(by_group) | set(verdicts)):
        found = by_group.get(group, [])
        lines.append(f"== {escape(group) if group else '(no family)'}")
        if group in verdicts:
            lines += _call_block(verdicts[group])
        infos = [f for f in found if f.level == Severity.INFO]
        for f in found:
            if f.level != Severity.INFO:
                lines += _finding_lines(f, report.evidence)
        lines += _routine(infos)
    counts = {s: sum(1 for f in report.findings if f.level == s) for s in Severity}
    summary = ", ".join(f"{n} {s.label}" for s, n in sorted(counts.items(), reverse=True) if n)
    lines.append(f"{len(report.findings)} finding(s)" + (f": {summary}" if summary else ""))
    return "\n".join(lines) + "\n"


#: an image's text after its time stamp, by what it is made of: a log repeats its command
#: lines, and quoting one costs more than the rest of its line (bounded, cleared when full)
_REST: dict[tuple[object, ...], str] = {}


def _image_text(img: Image) -> str:
    key = (img.source, img.command, img.argv0, img.args, img.target, img.parent_cmdline,
           img.attempts)  # fmt: skip
    rest = _REST.get(key)
    if rest is None:
        if len(_REST) >= 1 << 16:
            _REST.clear()
        parent = parent_line(img)
        tried = ", ".join(f"{escape(p)} ({escape(e)})" for p, e in img.attempts)
        if img.source == "trace-fork":
            rest = _REST[key] = f"({fork_words(img)})"
            return f"[{img.source}] {stamp(img)} {rest}"
        rest = _REST[key] = (
            f"{quote_argv(argv_of(img))}  -> {escape(img.target) if img.target else '?'}"
            + (f"  started by {parent}" if parent else "")
            + (f"  tried {tried}" if tried else "")
        )
    return f"[{img.source}] {stamp(img)} {rest}"


_SECONDS: dict[int, str] = {}


def stamp_of_seconds(t: float) -> str:
    """family.view.stamp of the time `t` (UTC seconds, NaN for unknown), without a datetime
    per image: the microseconds are rounded as datetime.fromtimestamp rounds them (half to
    even), and the text up to the second is kept per second."""
    if not 0 <= t < MAX_SECONDS:  # NaN too
        return "?"
    frac, whole = math.modf(t)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        us -= 1_000_000
        whole += 1.0
    sec = int(whole)
    head = _SECONDS.get(sec)
    if head is None:
        if len(_SECONDS) >= 1 << 16:
            _SECONDS.clear()
        d = datetime.fromtimestamp(sec, tz=timezone.utc)
        if d.year < 1000:
            head = d.strftime("%Y-%m-%dT%H:%M:%S")
        else:
            head = f"{d.year}-{d.month:02}-{d.day:02}T{d.hour:02}:{d.minute:02}:{d.second:02}"
        _SECONDS[sec] = head
    return f"{head}.{us // 1000:03}Z"


def _net_lines(pad: str, said: Iterable[str]) -> Iterator[str]:
    """The lines under an exec for what it did on the network (family.netfacts' words)."""
    for phrase in said:
        yield f"{pad}net: {escape(phrase)}"


class _Printer:
    """One forest's lines, from its columns."""

    def __init__(
        self,
        cols: Columns,
        supervisors: Mapping[tuple[str, int], str],
        mark: Callable[[str], str] | None,
        net: NetFacts,
    ) -> None:
        self.c = cols
        self.supervisors = supervisors
        self.mark = mark
        self.net = net if net.by_ident else None
        self.rest: list[str | None] = [None] * len(cols.statics)

    def _rest(self, sid: int) -> str:
        """_image_text's text after the stamp, for a shim row's static."""
        text = self.rest[sid]
        if text is None:
            st = self.c.statics[sid]
            shim, target, pcmd, args = st.shim, st.target, st.parent_cmdline, st.args
            parent = quote_argv(st.parent_argv) if st.parent_argv else ""
            parent = parent or (quote_arg(pcmd) if pcmd else "")
            text = self.rest[sid] = (
                f"{quote_argv([shim.encode(), *args])}  -> {escape(target) if target else '?'}"
                + (f"  started by {parent}" if parent else "")
            )
        return text

    def _where(self, ref: int) -> str:
        c = self.c
        seg = c.r_seg[ref]
        return c.wheres[ref] if seg < 0 else f"{c.segs[seg]}@{c.r_off[ref]}"

    def image(self, k: int) -> tuple[str, bytes, str]:
        """(text after the node's head or `exec`, cwd, cwd_unknown) of image k."""
        c = self.c
        ref = c.i_ref[k]
        if ref < 0:
            img = c.others[-1 - ref]
            return _image_text(img), img.cwd, img.cwd_unknown
        sid = c.r_static[ref]
        static = c.statics[sid]
        return f"[shim] {stamp_of_seconds(c.r_time[ref])} {self._rest(sid)}", static[0], static[1]

    def _mark_of(self, k: int) -> str:
        if self.mark is None:
            return ""
        ref = self.c.i_ref[k]
        word = self.mark(self.c.others[-1 - ref].where if ref < 0 else self._where(ref))
        return f"  [{word}]" if word else ""

    def _cwd_of(self, k: int) -> bytes:
        ref = self.c.i_ref[k]
        return self.c.others[-1 - ref].cwd if ref < 0 else self.c.statics[self.c.r_static[ref]][0]

    def parent_cwd(self, node: int) -> bytes | None:
        """The cwd a node's first image is told apart from: its nearest ancestor's that has
        images, its last image's (what a root is printed under when it is not a root)."""
        c = self.c
        p = c.parent[node]
        while p >= 0 and c.img[p] < 0:
            p = c.parent[p]
        if p < 0:
            return None
        *_, last = c.chain(p)
        return self._cwd_of(last)

    def _said(self, node: int) -> dict[int, list[str]]:
        """netfacts' lines of a process by its images' order (an empty dict: none)."""
        c, net = self.c, self.net
        if net is None or not c.known[node]:
            return {}
        ident = c.ident(node)
        if ident not in net.by_ident:
            return {}
        return net.said_at(ident, [c.image(k, node) for k in c.chain(node)])

    def _head(self, node: int) -> str:
        c = self.c
        pid = c.pid_of(node)
        if c.known[node]:
            return f"{pid}"
        boot = c.boots[c.boot[node]]
        known = self.supervisors.get((boot, pid))
        if known is not None:
            return f"{pid} {safe(known)}"
        return f"? {pid} (parent not in log) boot {escape(boot[:8])}"

    def lines(self, root: int) -> Iterator[str]:
        """One root's lines. The common case (a known process, a shim row) is inlined: a
        million lines."""
        c = self.c
        kid, sib, img, nxt, iref = c.kid, c.sib, c.img, c.i_next, c.i_ref
        pids, known, r_static, r_time, statics = c.pid, c.known, c.r_static, c.r_time, c.statics
        rests, marking = self.rest, self.mark is not None
        # (node, lead, cont, the cwd of the nearest ancestor's last image: parent_cwd)
        stack: list[tuple[int, str, str, bytes | None]] = [(root, "", "", self.parent_cwd(root))]
        while stack:
            node, lead, cont, pcwd = stack.pop()
            pid = pids[node]
            head = str(pid) if known[node] and pid > _WIDE else self._head(node)
            k = img[node]
            if k < 0:
                yield lead + head
                cwd = pcwd
            else:
                prev = pcwd
                pad = under = ""
                said = self._said(node) if self.net is not None else None
                j = 0
                while k >= 0:
                    ref = iref[k]
                    if ref >= 0:
                        sid = r_static[ref]
                        st = statics[sid]
                        cwd, unknown = st[0], st[1]
                        rest = rests[sid]
                        if rest is None:
                            rest = self._rest(sid)
                        text = f"[shim] {stamp_of_seconds(r_time[ref])} {rest}"
                    else:
                        text, cwd, unknown = self.image(k)
                    extra = f"  cwd {cwd_text(cwd, unknown)}" if unknown or cwd != prev else ""
                    mk = self._mark_of(k) if marking else ""
                    if not pad:
                        yield f"{lead}{head} {text}{extra}{mk}"
                        under = f"{cont}{' ' * len(head)} "
                        pad = under + "exec "
                    else:
                        yield f"{pad}{text}{extra}{mk}"
                    if said and j in said:
                        yield from _net_lines(under, said[j])
                    j += 1
                    prev = cwd
                    k = nxt[k]
            ch = kid[node]
            if ch < 0:
                continue
            kids = []
            while ch >= 0:
                kids.append(ch)
                ch = sib[ch]
            stack.append((kids.pop(), cont + "└─ ", cont + "   ", cwd))
            if kids:
                mid_lead, mid_cont = cont + "├─ ", cont + "│  "
                for ch in reversed(kids):
                    stack.append((ch, mid_lead, mid_cont, cwd))


def iter_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    supervisors: Mapping[tuple[str, int], str] | None = None,
    mark: Callable[[str], str] | None = None,
) -> Iterator[str]:
    """The text view line by line, so a large forest is written without one huge string.
    `supervisors`: (boot id, pid) -> what a process missing from the log is, from the
    sessions' start records (family.view.session_parents). `mark(where)`: a word to show
    after an image (a record no verified seal covers). With the forest's socket calls
    (`forest.net`), each exec's are under it."""
    yield from _tree_header(forest, subject)
    printer = _Printer(forest.cols, supervisors or {}, mark, forest.net)
    for root in forest.ids:
        yield ""
        yield from printer.lines(root)


def _tree_header(forest: Forest, subject: Mapping[str, Any]) -> Iterator[str]:
    for k, v in subject.items():
        yield f"{k}: {escape(str(v))}"
    yield f"{forest.count} process(es), {forest.images} image(s), {len(forest.ids)} root(s)"


def render_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    supervisors: Mapping[tuple[str, int], str] | None = None,
) -> str:
    return "\n".join(iter_tree_text(forest, subject, supervisors)) + "\n"


_BATCH = 4096


def write_tree_text(
    forest: Forest,
    subject: Mapping[str, Any],
    emit: Callable[[str], None],
    supervisors: Mapping[tuple[str, int], str] | None = None,
    mark: Callable[[str], str] | None = None,
) -> None:
    """iter_tree_text's lines, each followed by a newline, handed to `emit` in batches
    (a large forest never becomes one string)."""
    _emit_lines(iter_tree_text(forest, subject, supervisors, mark), emit)


def _emit_lines(lines: Iterable[str], emit: Callable[[str], object]) -> None:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH:
            batch.append("")
            emit("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        emit("\n".join(batch))
