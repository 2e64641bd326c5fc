"""Help text: `mcpshim --help` lists the commands from the lazy table exactly as click would
from the commands themselves, at every width; every `mcpshim ... --help` is the text held in
tests/data/help.json (a change to one is a change to that file, made on purpose:
`python -m tests.cli.test_help --update`); and what `--help` and `sessions` import is held."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from mcpshim.cli import COMMAND_MODULES, COMMAND_TABLE, cli
from tests.fixtures.home import DATA, Home

HELD = DATA / "help.json"
WIDTH = "80"


def _paths(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from _paths(sub, (*path, name))


def help_texts() -> dict[str, str]:
    """`mcpshim ... --help` of every command, hidden ones too, at COLUMNS=80."""
    out = {}
    for path in _paths(cli):
        done = CliRunner().invoke(
            cli, [*path, "--help"], env={"COLUMNS": WIDTH}, prog_name="mcpshim"
        )
        assert done.exit_code == 0, (path, done.output)
        out[" ".join(("mcpshim", *path))] = done.output
    return out


def test_every_help_text_is_the_one_held() -> None:
    held = json.loads(HELD.read_text(encoding="utf-8"))
    now = help_texts()
    assert sorted(now) == sorted(held)
    changed = [path for path in held if now[path] != held[path]]
    assert changed == [], changed


def test_the_table_holds_each_commands_first_paragraph() -> None:
    for name, (module, summary) in COMMAND_TABLE.items():
        [real] = [c for c in importlib.import_module(f"mcpshim.cli.{module}").COMMANDS
                  if c.name == name]  # fmt: skip
        assert real.help is not None and not real.short_help and not real.deprecated, name
        assert summary == " ".join(real.help.split("\n\n")[0].split()), name
        stand_in = click.Command(name, help=summary)
        for limit in range(1, 200):
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit)


_EAGER = """
import importlib, click, mcpshim.cli as m
for module in set(m.COMMAND_MODULES.values()):
    importlib.import_module("mcpshim.cli." + module)
m._Commands.format_commands = click.Group.format_commands  # click's own: asks each command
m.main(["--help"])
"""


@pytest.mark.parametrize("width", [30, 60, 80, 100, 120, 200])
def test_the_lazy_listing_is_clicks_own_at_every_width(width: int) -> None:
    def run(*argv: str) -> str:
        return subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, timeout=60, check=True,
            env={"COLUMNS": str(width), "PATH": "/usr/bin:/bin"},
        ).stdout  # fmt: skip

    lazy = run("-m", "mcpshim", "--help")
    assert lazy == run("-c", _EAGER)
    assert all(f"\n  {name} " in lazy for name in COMMAND_MODULES)


_MODULES = """
import sys
from mcpshim.cli import main
sys.argv = ["mcpshim", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
ours = sorted(m for m in sys.modules if m == "mcpshim" or m.startswith("mcpshim."))
others = sorted({m.split(".")[0] for m in sys.modules} - set(sys.stdlib_module_names)
                - {"mcpshim", "__main__", "_virtualenv", "_distutils_hack"})
print(ours, others, file=sys.stderr)
"""


def imports(home: Home, *argv: str) -> tuple[list[str], list[str]]:
    """The mcpshim modules, and the third-party packages, a command imports."""
    env = {k: v for k, v in home.env.items() if not k.startswith("COV")}  # (make coverage's)
    done = subprocess.run(
        [sys.executable, "-c", _MODULES, *argv],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    ours, others = done.stderr.strip().splitlines()[-1].split("] [")
    return eval(ours + "]"), eval("[" + others)


def test_help_imports_the_cli_and_click_only(home: Home) -> None:
    ours, others = imports(home, "--help")
    assert ours == ["mcpshim", "mcpshim.base", "mcpshim.base.display", "mcpshim.cli",
                    "mcpshim.errors"]  # fmt: skip
    assert others == ["click"]


def test_sessions_on_an_empty_log_imports_no_review(home: Home) -> None:
    home.loc.log_dir.mkdir(parents=True)
    home.loc.log_file.touch()
    ours, others = imports(home, "sessions")
    assert not [
        m
        for m in ours
        if m.split(".")[1:2] in (["review"], ["family"], ["render"], ["pathcheck"], ["relay"])
    ], ours
    assert ours == SESSIONS_IMPORTS, ours
    assert others == ["click", "orjson", "platformdirs", "tomli_w"], others


SESSIONS_IMPORTS = [
    "mcpshim", "mcpshim.base", "mcpshim.base.display", "mcpshim.base.fdio", "mcpshim.base.flock",
    "mcpshim.base.frozen", "mcpshim.base.safewrite", "mcpshim.cli", "mcpshim.cli.options",
    "mcpshim.cli.sessions_cmd", "mcpshim.errors", "mcpshim.log", "mcpshim.log.boot",
    "mcpshim.log.events", "mcpshim.log.execfields", "mcpshim.log.execlog", "mcpshim.log.frame",
    "mcpshim.log.framing",
    "mcpshim.log.indexscan", "mcpshim.log.ledger", "mcpshim.log.marks", "mcpshim.log.parentfield",
    "mcpshim.log.rows", "mcpshim.log.sessionindex", "mcpshim.log.sessions",
    "mcpshim.log.shimhelper", "mcpshim.paths", "mcpshim.shim", "mcpshim.shim.manifest",
]  # fmt: skip


def main() -> None:
    """--update: write what every help says now into tests/data/help.json."""
    if sys.argv[1:] != ["--update"]:
        raise SystemExit("usage: python -m tests.cli.test_help --update")
    texts = help_texts()
    HELD.write_text(json.dumps(texts, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{HELD}: {len(texts)} help texts", file=sys.stderr)


if __name__ == "__main__":
    main()


def test_a_plain_review_imports_no_lock_machinery_and_no_credential_table(home: Home) -> None:
    """What took `review --session` under its bound (issue 31): without --lock it loads
    neither the identities (dpkg's subprocess, a thread pool), the drift diff, nor the
    redaction table's patterns; without a policy file no PATH or client-config rule."""
    from tests.fixtures.reviewkit import fake_exec

    fake_exec(home.loc, boot="b" * 36, pid=100, ppid=1, start=5, args=["status"], session="s1")
    ours, others = imports(home, "review", "--session", "s1", "--format", "json")
    assert "mcpshim.review.engine" in ours and "mcpshim.log.redactmark" in ours  # it reviewed
    unwanted = {
        "mcpshim.contract.identity", "mcpshim.contract.identitycache", "mcpshim.review.held",
        "mcpshim.review.departures", "mcpshim.contract.drift", "mcpshim.log.redact",
        "mcpshim.log.redact_rules", "mcpshim.pathcheck.lint", "mcpshim.pathcheck.launch",
    }  # fmt: skip
    assert not unwanted & set(ours), sorted(unwanted & set(ours))
    assert "orjson" in others  # its JSON
    ours, _ = imports(home, "review", "--session", "s1", "--lock", str(home.root / "none.lock"))
    assert "mcpshim.review.held" in ours  # --lock takes that path (here: to its error)
