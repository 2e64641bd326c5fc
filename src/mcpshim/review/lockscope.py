"""Whose approval each fact of a session belongs to (the lock, approve's cards, departures).

Review files a fact under the call in flight when it happened (family.attribution). An
approval is made once, for the server, of what a helper the server keeps does on its own
account: a browser the first browser_navigate happened to launch, its renderers and its
own contacts, GitPython's cat-file. Filed under the tool that happened to start it, a lock
approved from one call order would depart in another. What the call asked for by name
(bash a session_create was given, the page a navigate's URL names) stays the call's.
"""

from __future__ import annotations

from mcpshim.family.attribution import Attribution, Owner
from mcpshim.family.lifetimes import KEPT
from mcpshim.family.netfacts import destination
from mcpshim.family.tree import Node
from mcpshim.log.netrecords import NetRecord
from mcpshim.review.rules.explain import family_of, named_by_arguments

__all__ = ["lock_owner", "net_owner"]


def _kept_above(att: Attribution, node: Node) -> bool:
    """The process lives in a helper the server keeps between calls (itself or above it):
    a browser, a language server, GitPython's cat-file (family.lifetimes)."""
    n: Node | None = node
    while n is not None and n.known and n is not att.server:
        kind = att.outlived_kind.get(n.id)
        if kind is not None and kind[0] == KEPT:
            return True
        n = n.parent
    return False


def lock_owner(att: Attribution, node: Node) -> Owner:
    """Whose approval a process's execs belong to: its call's, except what a helper the
    server keeps does that the call did not ask for by name (the browser a first
    browser_navigate happened to launch, its renderers): the server's, so a lock approved
    from one call order holds for another (issue 37, item 4)."""
    if node is att.server:
        return None
    owner = att.owner.get(node.id)
    if isinstance(owner, int) and _kept_above(att, node):
        img = node.current
        if not named_by_arguments(family_of(img.command, img.target), att.calls[owner].arguments):
            return None
    return owner


def net_owner(att: Attribution, node: Node, n: NetRecord) -> Owner:
    """Whose approval a socket call belongs to: the call in flight then, unless the server
    itself or a helper it keeps made it and the call's arguments do not name where it
    went (Playwright's own browser socket is opened by whichever call comes first)."""
    owner = att.owner_at(None if node is att.server else node, n.time, destination(n))
    if not isinstance(owner, int) or not (node is att.server or _kept_above(att, node)):
        return owner
    return owner if att.holds(owner, destination(n)) else None
