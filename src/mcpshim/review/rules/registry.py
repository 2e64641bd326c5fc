"""A check is a function over one image, marked with the rules it may yield (`check`);
review.catalogue finds the checks (nothing registers by being imported).

A check gets the review `Context` and one `Image` and yields `Hit`s; review turns hits into
findings grouped by family, with the record that proves each one as evidence. Every hit puts
``command`` and ``path`` into its evidence data so policy ignores can match them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpshim.family.tree import Image
from mcpshim.review.baseline import Baseline
from mcpshim.review.findings import Rule, Severity
from mcpshim.review.policy import Policy
from mcpshim.shim.manifest import Manifest

__all__ = ["Check", "Context", "Hit", "check", "run_checks"]


@dataclass(frozen=True)
class Hit:
    rule: Rule
    message: str
    key: str  # what makes two hits the same finding (with the rule id)
    path: str = ""  # the executable, directory or file the hit is about
    data: Mapping[str, Any] = field(default_factory=dict)
    severity: Severity | None = None  # when the rule's default does not fit this hit


Check = Callable[["Context", Image], Iterable[Hit]]


def _catalogue_checks() -> tuple[Check, ...]:
    from mcpshim.review.catalogue import checks

    return checks()


@dataclass
class Context:
    """What the checks may consult besides the record; caches make filesystem checks once."""

    policy: Policy
    shim_dirs: tuple[str, ...] = ()
    manifest: Manifest | None = None
    baseline: Baseline | None = None
    cache: dict[tuple[str, str], Any] = field(default_factory=dict)
    #: every installed shim directory's manifest (shim.registry), the primary one first
    manifests: Mapping[str, Manifest] = field(default_factory=dict)
    #: the per-image checks to run (review.catalogue's)
    checks: tuple[Check, ...] = field(default_factory=_catalogue_checks)

    def manifest_for(self, img: Image) -> Manifest | None:
        """The manifest of the shim directory a shim record came through."""
        d = os.path.dirname(img.argv0.decode("utf-8", "surrogateescape"))
        got = self.manifests.get(d)
        if got is None and d:
            got = self.manifests.get(os.path.realpath(d))
        return got or self.manifest

    def shim_names(self) -> set[str]:
        """The commands any installed shim directory shims."""
        names = set(self.manifest.shims) if self.manifest is not None else set()
        for m in self.manifests.values():
            names |= set(m.shims)
        return names

    def pinned(self, name: str) -> list[str]:
        """What each installed shim directory pins `name` to."""
        found = [m.shims[name].target for m in self.manifests.values() if name in m.shims]
        if self.manifest is not None and name in self.manifest.shims:
            found.insert(0, self.manifest.shims[name].target)
        return list(dict.fromkeys(found))

    def cached(self, kind: str, key: str, compute: Callable[[], Any]) -> Any:
        k = (kind, key)
        if k not in self.cache:
            self.cache[k] = compute()
        return self.cache[k]


def check(*rules: Rule, parents: bool = False) -> Callable[[Check], Check]:
    """Mark a function as a check that may yield hits of these rules (the catalogue finds
    it in its module; nothing is registered here). `parents`: it also reads a shell known
    only from its child's record (parent evidence), whose line most rules leave to MCS405."""

    def deco(fn: Check) -> Check:
        fn.check_rules = rules  # type: ignore[attr-defined]
        fn.check_parents = parents  # type: ignore[attr-defined]
        return fn

    return deco


def run_checks(ctx: Context, img: Image) -> Iterator[Hit]:
    parent = img.source == "parent"
    for fn in ctx.checks:
        if not parent or getattr(fn, "check_parents", False):
            yield from fn(ctx, img)
