"""Approval cards as text: every label lines up with a space before its value (the longest
label, "left running after the call:", ran into its value: issue 30 item 10)."""

from __future__ import annotations

import re

from mcpshim.contract.lockfile import Boundary, Executable, ServerApproval, ToolApproval
from mcpshim.render.cards import cards_text
from mcpshim.review.boundary import Seen
from mcpshim.review.cards import ServerCard, ToolCard


def test_every_label_is_followed_by_a_space_and_values_line_up() -> None:
    git = Executable("/usr/bin/git", "ab" * 32, "dpkg package git", ("PATH",), ("status",))
    tool = ToolApproval("t", "cd" * 32, "Run git.", True, Boundary((git,), ("/work",)))
    server = ServerApproval("s", tools={"t": tool})
    card = ServerCard(server, (ToolCard(tool, 1, Seen(), {}),), Seen(), {}, "S1", True)
    text = cards_text(card)
    rows = [line for line in text.splitlines() if line.startswith("   ") and ":" in line]
    assert "   left running after the call: none" in text
    assert not [r for r in rows if re.match(r"   [a-z -]+:\S", r)], text
    starts = {m.end() for r in rows if (m := re.match(r"   [a-z][a-z -]*:\s+", r))}
    assert len(starts) == 1, text  # one column for every value
