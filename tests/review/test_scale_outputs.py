"""`tree` and `review` print what main's code printed before issue 20's reading path.

The seeded 50,000-record log of benchmarks/review_scale.py (pids wrapping, two boots,
exec images, unknown parents, credentials, temporary cwds) is written into the test's
home and each command runs through the CLI. The expected outputs were produced by main
ee79ea5 (before the fast reader, the column printer and the review's field-level scan),
its temporary directory written as TMP: review's JSON and text in full
(tests/data/scale50k/), tree's text and JSON and review's SARIF as SHA-256. Review runs
in one process.

Since issue 29 a tree JSON node has `net` (its socket calls; none here), taken out before
the digest is compared, and MCS108 says what a helper's arguments name, not that it "contacted" them
(review's JSON, text and SARIF differ from ee79ea5's in those words only). Since issue 38's
rubric a composed shell line (MCS105) is low, each finding says its confidence, MCS107 is
named project-code-ran: regenerated then, each time after a check that the findings were
ee79ea5's with only that changed (the same 216 findings, the same JSON otherwise).

Regenerate only from a commit whose output is known right:
`python tests/review/test_scale_outputs.py` (HOME and XDG_* set to an empty directory) writes the
files and prints the digests.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpshim.base.display import dumps
from mcpshim.cli import cli
from tests.fixtures.benchmod import load_benchmark
from tests.fixtures.home import DATA, Home

DATA = DATA / "scale50k"
RECORDS = 50_000
#: SHA-256 of main ee79ea5's output (TMP for the temporary directory)
DIGESTS = {
    "tree.txt": "42a999aa80eaa4bb0ebcb7f333020576cb00d92b2249f75b448ee19b48ab7366",
    "tree.json": "b32ec225eb6d7bb43896f52818fc6388ca1710e9478611a891276702242f1219",
    "review.sarif": "836c252792473e7f9880582124c07f044a0f310bf4b14008349f3ccaaf42bc81",
}
#: compared in full (gzip in tests/data/scale50k)
FULL = ("review.json", "review.txt")
ARGS = {
    "tree.txt": ["tree", "--format", "text"],
    "tree.json": ["tree", "--format", "json"],
    "review.json": ["review", "--format", "json"],
    "review.txt": ["review", "--format", "text"],
    "review.sarif": ["review", "--format", "sarif"],
}


def _bench() -> object:
    return load_benchmark("review_scale")


def write_log(base: Path) -> None:
    _bench().generate(base / "log", base / "shims", RECORDS)  # type: ignore[attr-defined]


def run(base: Path, name: str) -> str:
    argv = [*ARGS[name][:1], "--dir", str(base / "shims"), "--log-dir", str(base / "log")]
    argv += ARGS[name][1:]
    done = CliRunner().invoke(cli, argv, catch_exceptions=False, standalone_mode=False)
    assert (done.return_value or 0) in (0, 1), done.output
    return done.stdout.replace(str(base), "TMP")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fixed_base() -> Path:
    """A new directory whose path has the same length in every run: the records hold the
    shim directory's path, so the offsets the outputs quote depend on its length."""
    return Path(tempfile.mkdtemp(prefix="mcpshim-scale50k-", dir="/tmp"))


@pytest.fixture(scope="module")
def seeded() -> Iterator[Path]:
    base = fixed_base()
    try:
        write_log(base)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _without_net(text: str) -> str:
    """Tree JSON as ee79ea5 wrote it: since issue 29 each node has its socket calls,
    `net` (none in this untraced log: each is [], and then taken out)."""
    doc = json.loads(text)
    stack = list(doc["roots"])
    while stack:
        node = stack.pop()
        assert node.pop("net") == []
        stack += node["children"]
    return dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("name", ["tree.txt", "tree.json"])
def test_tree_prints_what_main_printed(home: Home, seeded: Path, name: str) -> None:
    got = run(seeded, name)
    assert _digest(_without_net(got) if name == "tree.json" else got) == DIGESTS[name]


def test_review_prints_what_main_printed(home: Home, seeded: Path) -> None:
    for name in FULL:
        expected = gzip.decompress((DATA / f"{name}.gz").read_bytes()).decode()
        got = run(seeded, name)
        assert got.splitlines() == expected.splitlines(), name
        assert got == expected
    assert _digest(run(seeded, "review.sarif")) == DIGESTS["review.sarif"]


if __name__ == "__main__":  # regenerate (see the docstring)
    out = fixed_base()
    write_log(out)
    for name in ARGS:
        text = run(out, name)
        if name in FULL:
            DATA.mkdir(parents=True, exist_ok=True)
            (DATA / f"{name}.gz").write_bytes(gzip.compress(text.encode(), 9, mtime=0))
        else:
            print(name, _digest(_without_net(text) if name == "tree.json" else text))
    shutil.rmtree(out)
