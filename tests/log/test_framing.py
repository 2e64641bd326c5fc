"""framing.pieces cuts a stream at its end markers wherever its chunks fall."""

from __future__ import annotations

import io
import random

import pytest

from mcpshim.log import framing


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_pieces_are_the_bytes_between_end_markers(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(framing, "_CHUNK", chunk)
    rnd = random.Random(chunk)
    alphabet = [b"\0", b"\n", b"\0\n", b"a", b"\0R", b"\0="]
    for _ in range(300):
        data = b"".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 40)))
        base = rnd.choice([0, 5, 1 << 33])
        problems: list[framing.LogProblem] = []
        got = list(framing.pieces(io.BytesIO(data), "exec.log", problems, base))
        *whole, torn = data.split(b"\0\n")
        expected, pos = [], base
        for piece in whole:
            if piece:
                expected.append((pos, piece))
            pos += len(piece) + 2
        assert got == expected, data
        assert [p.where for p in problems] == ([f"exec.log@{pos}"] if torn else []), data
