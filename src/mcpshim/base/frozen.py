"""A fast positional constructor for frozen, slotted dataclasses.

A frozen dataclass's `__init__` sets each field through `object.__setattr__`, which costs
about as much as the rest of decoding a log record; the reader makes one record and one
image per exec, a million per large log. `positional(cls)` builds the same instance by
calling each slot's descriptor directly: same fields, same values, still immutable after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["positional"]

T = TypeVar("T")


def positional(cls: type[T]) -> Callable[..., T]:
    """`make(*values)` equal to `cls(*values)`, every field given, in declaration order.

    Only for frozen dataclasses with slots and without `__post_init__` (checked here, so
    a class that grows one fails loudly at import rather than skipping it)."""
    if not dataclasses.is_dataclass(cls) or not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} is not a slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    names = [f.name for f in dataclasses.fields(cls)]
    if any(name.startswith("_positional_") for name in names):
        raise TypeError(f"{cls.__name__} has a field named like positional's own names")
    # the helpers' names cannot be a field's (a field `new` would shadow object.__new__)
    env: dict[str, Any] = {"_positional_new": object.__new__, "_positional_cls": cls}
    body = []
    for i, name in enumerate(names):
        env[f"_positional_set{i}"] = cls.__dict__[name].__set__
        body.append(f"    _positional_set{i}(_positional_obj, {name})\n")
    src = (
        f"def make({', '.join(names)}):\n"
        "    _positional_obj = _positional_new(_positional_cls)\n"
        f"{''.join(body)}    return _positional_obj\n"
    )
    exec(src, env)  # noqa: S102 - the source is built from the class's own field names
    make: Callable[..., T] = env["make"]
    return make
