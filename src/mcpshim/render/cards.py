"""Approval cards as a terminal reads them, as Markdown for a code review, as HTML sections.

Each card opens with one plain sentence of consequences ("run_test runs /usr/bin/npm as
root in /work/repo; it runs scripts from /work/repo/package.json, which whoever can edit the
checkout chooses; it connected to 10.0.0.5:443"), then the evidence line by line. Every
string that came from a process or a server goes through display.escape first, then
through the escaping of the target format.
"""

from __future__ import annotations

from html import escape as _html

from mcpshim.base.display import escape
from mcpshim.contract.canon import short
from mcpshim.contract.lockfile import Boundary
from mcpshim.family.overlap import calls_label
from mcpshim.render.md import md_code, md_text
from mcpshim.review.boundary import Seen
from mcpshim.review.cards import ServerCard, ToolCard
from mcpshim.sandbox.binfmt import interpreter_kind

__all__ = ["ambiguity_note", "card_lines", "cards_html", "cards_md", "cards_text", "summary"]

_DESC_LINES = 4
_LABEL = len("left running after the call: ")  # the longest label, and a space after it


def _list(items: list[str], none: str = "none") -> str:
    return ", ".join(items) if items else none


def _first_lines(text: str) -> list[str]:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    more = len(lines) - _DESC_LINES
    return lines[:_DESC_LINES] + ([f"... ({more} more lines)"] if more > 0 else [])


def interpreter_note(path: str) -> str:
    """What approving an interpreter approves: every script it may be handed. Said on the
    card because `run --contain` holds the family to programs, not to what they read."""
    kind = interpreter_kind(path)
    if kind is None:
        return ""
    what = "shell script or command line" if kind == "shell" else "script or code"
    return (
        f"an interpreter: approving it approves any {what} it is given; run --contain checks "
        "the programs executed, not the files they read (`sh build.sh` runs, `./build.sh` not)"
    )


def _runs(b: Boundary) -> list[str]:
    return [e.path for e in b.executables]


def summary(name: str, b: Boundary, seen: Seen, called: bool) -> str:
    """The card's first sentence: what approving it lets happen, in plain words."""
    if not called:
        return (
            f"{name} was not called in this session: this approves its definition only, and "
            "anything it runs later will be reported as a departure."
        )
    users = _list(list(b.users), "the server's user")
    if not b.executables:
        what = f"{name} started no program"
    else:
        first = [e.path for e in b.executables if not any("project file" in r for r in e.reached)]
        what = f"{name} runs {_list(first or _runs(b))} as {users}"
        if b.cwd_roots:
            what += f" in {_list(list(b.cwd_roots))}"
    parts = [what]
    if seen.project:
        files = _list(sorted(seen.project))
        chained = [e.path for e in b.executables if any("project file" in r for r in e.reached)]
        parts.append(
            f"it runs scripts from a project file ({files}): whoever can edit that file "
            f"chooses what runs" + (f"; this time they started {_list(chained)}" if chained else "")
        )
    if b.destinations or b.listens:
        net = [f"connected to {d}" for d in b.destinations]
        net += [f"listened on {d}" for d in b.listens]
        parts.append("it reached the network: " + _list(net))
    else:
        parts.append("it did not reach the network (no socket was seen)")
    if seen.tried:
        parts.append("it tried " + _list(list(seen.tried)) + ", and reached nothing there")
    if b.credential_env:
        parts.append("its processes held " + _list(list(b.credential_env)))
    fs = seen.files
    if fs.credentials:
        parts.append("it read credential files: " + _list(fs.said(fs.credentials)))
    if fs.persistence:
        parts.append(
            "it wrote places that run later without being asked: " + _list(fs.said(fs.persistence))
        )
    if fs.ran_written:
        parts.append("it ran files the session wrote: " + _list(fs.said(fs.ran_written)))
    if b.outlives:
        left = sorted({n.current.command for n, _w, _t in seen.outlived})
        parts.append("it left processes running after it answered: " + _list(left))
    elif seen.processes:
        parts.append("it left nothing running after it answered")
    if seen.shared:
        parts.append(
            f"{seen.shared} of these processes started while calls {calls_label(seen.shared_calls)}"
            " overlapped and could be another call's: each is counted for every tool it may "
            "belong to"
        )
    return "; ".join(parts) + "."


def card_lines(card: ToolCard) -> list[tuple[str, str]]:
    """(label, text) rows of one card, unescaped; each format escapes them its way."""
    a, b = card.approval, card.approval.boundary
    rows: list[tuple[str, str]] = [("summary", summary(a.name, b, card.seen, a.called))]
    for line in _first_lines(a.description) or ["(no description)"]:
        rows.append(("description", line))
    state = f"{card.calls} call(s)" if card.calls else "definition only (not called)"
    if not card.listed:
        state += "; not in any tools/list of the session (definition unknown)"
    rows.append(("definition", f"{short(a.sha256)}; {state}"))
    for line in card.drift:
        rows.append(("drift from the lock", line))
    for e in b.executables:
        use = card.seen.uses.get(e.path)
        shapes = _list([s or "(no subcommand)" for s in e.shapes])
        reached = _list(list(e.reached))
        count = f", {use.count} exec(s)" if use else ""
        rows.append(("executable", f"{e.path}  {short(e.sha256)}  {e.vouched}"))
        rows.append(("", f"reached: {reached}; subcommands: {shapes}{count}"))
        if note := interpreter_note(e.path):
            rows.append(("", note))
    if b.executables:
        rows.append(("starts more programs", "yes" if len(b.executables) > 1 else "no"))
    rows.append(("working directories", _list(list(b.cwd_roots))))
    rows.append(("runs as", _list(list(b.users), "-")))
    rows.append(("network", _list([*b.destinations, *(f"listens on {x}" for x in b.listens)])))
    if card.seen.tried:
        rows.append(("tried, not reached", _list(list(card.seen.tried))))
    rows.append(("credential-like variables", _list(list(b.credential_env), "none seen")))
    rows += _file_rows(card.seen)
    left = [f"{n.current.command} (pid {n.pid}): {t}" for n, _w, t in card.seen.outlived]
    rows.append(("left running after the call", _list(left)))
    if card.seen.shared:
        rows.append(("attribution", ambiguity_note(card.seen)))
    return rows


def _file_rows(seen: Seen) -> list[tuple[str, str]]:
    """What it did with files that matter (traced sessions; none seen is said too)."""
    f = seen.files
    return [
        ("credential files read", _list(f.said(f.credentials), "none seen")),
        ("wrote what runs later", _list(f.said(f.persistence), "none seen")),
        ("ran files it wrote", _list(f.said(f.ran_written), "none seen")),
    ]


def ambiguity_note(seen: Seen) -> str:
    """What an approval made from overlapping calls is made of."""
    return (
        f"ambiguous: {seen.shared} process(es) started while calls "
        f"{calls_label(seen.shared_calls)} overlapped; no record told which call started "
        "each, so each is approved for every tool it may belong to"
    )


def _outside(card: ServerCard) -> list[tuple[str, str]]:
    b, p = card.approval.startup, card.approval.program
    rows = [("server program", f"{p.path}  {short(p.sha256)}  {p.vouched}" if p else "not seen")]
    if p is not None and (note := interpreter_note(p.path)):
        rows.append(("", note))
    rows.append(("executables", _list([f"{e.path} ({e.vouched})" for e in b.executables])))
    rows.append(("network", _list([*b.destinations, *(f"listens on {x}" for x in b.listens)])))
    rows.append(("credential-like variables", _list(list(b.credential_env), "none seen")))
    return rows + _file_rows(card.outside)


def _head(card: ServerCard) -> str:
    a = card.approval
    ver = f" {a.server_version}" if a.server_version else ""
    told = f" (calls itself {a.server_name}{ver})" if a.server_name else ""
    return f"server {a.name}{told}, session {card.session}"


def cards_text(card: ServerCard) -> str:
    out = [f"== {escape(_head(card))}"]
    if not card.listed:
        out.append("   (no tools/list was recorded: tool definitions are unknown)")
    for t in card.tools:
        out.append(f"\n-- tool {escape(t.name)}")
        for label, text in card_lines(t):
            out.append(f"   {label + ':' if label else '':<{_LABEL}}{escape(text)}")
    out.append("\n-- outside tool calls (the server itself, its start-up, other requests)")
    for label, text in _outside(card):
        out.append(f"   {label + ':' if label else '':<{_LABEL}}{escape(text)}")
    return "\n".join(out) + "\n"


def cards_md(card: ServerCard) -> str:
    out = [f"## Approval cards: {md_text(_head(card))}", ""]
    for t in card.tools:
        out += [f"### Tool {md_code(t.name)}", ""]
        for label, text in card_lines(t):
            if label == "summary":
                out += [f"> {md_text(text)}", ""]
            elif label == "description":
                out.append(f"- description: {md_text(text)}")
            else:
                out.append(f"- {md_text(label) + ': ' if label else '  '}{md_code(text)}")
        out.append("")
    out += ["### Outside tool calls", ""]
    out += [
        f"- {md_text(label) + ': ' if label else '  '}{md_code(text)}"
        for label, text in _outside(card)
    ]
    return "\n".join(out) + "\n"


def _h(text: str) -> str:
    return _html(escape(text), quote=True)


def cards_html(card: ServerCard) -> str:
    out = [f'<section id="cards"><h2>Approval cards: {_h(_head(card))}</h2>']
    for t in card.tools:
        out.append(f'<div class="call" id="tool-{_h(t.name)}"><div class="tool">{_h(t.name)}</div>')
        rows = []
        for label, text in card_lines(t):
            if label == "summary":
                out.append(f"<p><b>{_h(text)}</b></p>")
            else:
                rows.append(f"<dt>{_h(label)}</dt><dd><code>{_h(text)}</code></dd>")
        out.append(f'<dl class="card">{"".join(rows)}</dl></div>')
    rows = [f"<dt>{_h(k)}</dt><dd><code>{_h(v)}</code></dd>" for k, v in _outside(card)]
    out.append('<div class="call"><div class="tool">outside tool calls</div><dl class="card">')
    out.append("".join(rows) + "</dl></div></section>")
    return "".join(out)
