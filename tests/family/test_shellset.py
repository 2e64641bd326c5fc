"""coverage's ShellSet holds what the OrderedDict of (boot, pid, start) it replaced held."""

from __future__ import annotations

import random
from collections import OrderedDict

from mcpshim.family.shellset import ShellSet, shell_key

BOOTS = [
    "5f1c0de0-0000-4000-8000-00000000000a",
    "5F1C0DE0-0000-4000-8000-00000000000A",  # the same hex, not canonical: a different boot
    "5f1c0de0000040008000000000000000000a",
    "",
    "x",
]
VALUES = [None, 0, 1, -1, 300, 2**63, 2**64 - 2, 2**64 - 1, 2**64, 9_999_999_999_999_999_999]


def test_shellset_holds_what_the_ordered_dict_held() -> None:
    rnd = random.Random(7)
    for keep in (1, 3, 50):
        model: OrderedDict[tuple[str, int | None, int | None], None] = OrderedDict()
        got, other, other_model = ShellSet(), ShellSet(), OrderedDict()  # type: ignore[var-annotated]
        for _ in range(5000):
            ident = (rnd.choice(BOOTS), rnd.choice(VALUES[1:]), rnd.choice(VALUES))
            model[ident] = None
            if len(model) > keep:
                model.popitem(last=False)
            got.add(*ident, keep)  # type: ignore[arg-type]
            probe = (rnd.choice(BOOTS), rnd.choice(VALUES), rnd.choice(VALUES))
            assert (probe in got) == (probe in model)
            assert len(got) == len(model)
            if rnd.random() < 0.3:
                other.add(*probe, keep)  # type: ignore[arg-type]
                other_model[probe] = None
                if len(other_model) > keep:
                    other_model.popitem(last=False)
        got.update(other)
        model.update(other_model)
        assert [shell_key(*k) for k in model] == list(got.order) == list(got.keys)


def test_shell_keys_of_different_identities_differ() -> None:
    idents = {(b, p, s) for b in BOOTS for p in VALUES for s in VALUES}
    assert len({shell_key(*i) for i in idents}) == len(idents)
