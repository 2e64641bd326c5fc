"""The CLI imports a command's module only when the command runs: its table names every
command of every module, `review --help` imports no rule and no review engine (rules come
from one explicit catalogue), and starting one command does not import the others."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from click.testing import CliRunner

from mcpshim.cli import COMMAND_MODULES, cli


def _loaded(*argv: str) -> list[str]:
    """The mcpshim modules a fresh interpreter has loaded once `mcpshim ARGV` returned."""
    probe = (
        "import sys\nfrom mcpshim.cli import main\n"
        f"sys.argv = ['mcpshim', *{list(argv)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcpshim')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    out: list[str] = json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))
    return out


def test_the_table_names_every_command_of_every_module() -> None:
    found = {}
    for module in sorted(set(COMMAND_MODULES.values())):
        for command in importlib.import_module(f"mcpshim.cli.{module}").COMMANDS:
            found[command.name] = module
    assert found == COMMAND_MODULES
    listed = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"\n  {name} " in listed for name in COMMAND_MODULES), listed


def test_review_help_imports_no_rule_and_no_review_engine() -> None:
    """Issue 31: `review --help` is click's help of one command: no rule module, no review
    engine, no renderer (the rules load through review.catalogue in commands that review)."""
    loaded = _loaded("review", "--help")
    assert "mcpshim.cli.review_cmd" in loaded
    heavy = [m for m in loaded if m.startswith(("mcpshim.review.rules", "mcpshim.family"))]
    heavy += [m for m in loaded if m in {
        "mcpshim.review.catalogue", "mcpshim.review.engine", "mcpshim.review.scan",
        "mcpshim.review.pipeline", "mcpshim.review.departure_rules",
        "mcpshim.pathcheck.lint", "mcpshim.render.text", "mcpshim.render.sarif",
    }]  # fmt: skip
    assert heavy == [], heavy


def test_the_catalogue_is_what_rules_lists_and_checks_use() -> None:
    """One explicit catalogue (issue 26): `mcpshim rules` lists it, every check's rules are
    in it, and no module registers anything by being imported."""
    from mcpshim.review import catalogue

    listed = CliRunner().invoke(cli, ["rules", "--format", "json"]).output
    ids = [r["id"] for r in json.loads(listed)["rules"]]
    assert ids == [k for k in catalogue.rules() if not k.startswith("MCS9")]
    for fn in catalogue.checks():
        assert {r.id for r in fn.check_rules} <= set(catalogue.rules()), fn  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)) > 50


def test_one_command_does_not_import_the_others() -> None:
    probe = (
        "import sys\nfrom mcpshim.cli import main\nsys.argv = ['mcpshim', 'export', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcpshim.cli.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = done.stdout.strip().splitlines()[-1]
    assert "mcpshim.cli.export_cmd" in loaded
    for other in ("run_cmd", "approve_cmd", "review_cmd", "pathlint_cmd", "log_cmd"):
        assert f"mcpshim.cli.{other}" not in loaded, loaded
