"""What review, tree and report say about the log's seals: one `sealed:` line for their
header, and a mark on each record they show that no verified seal covers."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from mcpshim.errors import InputError
from mcpshim.paths import Locations
from mcpshim.review.findings import Finding

if TYPE_CHECKING:
    from mcpshim.seal.verify import Verification

NEVER_SEALED = "no: the log was never sealed (`mcpshim log seal --init`)"

__all__ = ["SealNote", "seal_note"]


@dataclasses.dataclass(frozen=True)
class SealNote:
    line: str
    mark: Callable[[str], str]  # where -> "" (sealed and intact), "unsealed" or "altered"

    def findings(self, found: Iterable[Finding]) -> list[Finding]:
        """Each piece of evidence outside the verified ranges gets its mark after `where`."""
        out = []
        for f in found:
            ev = tuple(
                dataclasses.replace(e, where=f"{e.where} [{m}]") if (m := self.mark(e.where)) else e
                for e in f.evidence
            )
            out.append(dataclasses.replace(f, evidence=ev) if ev != f.evidence else f)
        return out


def _nothing(where: str) -> str:
    return ""


def seal_note(loc: Locations, session: str | None = None) -> SealNote:
    """Verify the plain chain (and the sealer's state); a log never sealed marks nothing.
    A reader of one session learns from the session index that no segment holds a seal:
    with no sealer's state either, nothing is searched (nor the verifier loaded)."""
    from mcpshim.log.scope import scope
    from mcpshim.seal import state

    sc = scope(loc, session)
    if sc is not None and not sc.sealed and not state.default_state_path(loc.log_dir).exists():
        return SealNote(NEVER_SEALED, _nothing)
    from mcpshim.seal.verify import verify
    from mcpshim.seal.view import header_line

    result: Verification | None = None
    with contextlib.suppress(InputError, OSError):
        st = None
        with contextlib.suppress(InputError):
            st = state.load(state.default_state_path(loc.log_dir))
        result = verify(loc, (), None, st)  # `log verify`'s checks, markers too: one verdict
    if result is None:
        return SealNote("? (the log could not be read for its seals)", _nothing)
    if not result.chain:
        return SealNote(header_line(result), _nothing)
    return SealNote(header_line(result), result.mark)
