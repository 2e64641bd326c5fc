"""The CLI imports a command's module only when the command runs: its table names every
command of every module, each command module alone registers every rule, check and image
source the whole CLI does (in the same order: findings keep their order), and starting
one command does not import the others."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

from click.testing import CliRunner

from mcpshim.cli import COMMAND_MODULES, cli

_REGISTRIES = """
import importlib, json, sys
for m in sys.argv[1:]:
    importlib.import_module("mcpshim.cli." + m)
from mcpshim.family.images import SOURCES
from mcpshim.review.findings import RULES
from mcpshim.review.rules.registry import CHECKS
print(json.dumps({
    "common": "mcpshim.cli.common" in sys.modules,
    "rules": sorted(RULES),
    "checks": [(r.id, f.__module__, f.__qualname__) for r, f in CHECKS],
    "sources": sorted(SOURCES),
}))
"""


def _registries(*modules: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _REGISTRIES, *modules],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_the_table_names_every_command_of_every_module() -> None:
    found = {}
    for module in sorted(set(COMMAND_MODULES.values())):
        for command in importlib.import_module(f"mcpshim.cli.{module}").COMMANDS:
            found[command.name] = module
    assert found == COMMAND_MODULES
    listed = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"\n  {name} " in listed for name in COMMAND_MODULES), listed


def test_each_command_module_registers_what_the_whole_cli_does() -> None:
    modules = sorted(set(COMMAND_MODULES.values()))
    whole = _registries(*modules)
    assert (
        whole["rules"]
        and whole["checks"]
        and whole["sources"] == ["observed", "trace-exec", "trace-gap"]
    )
    for module in modules:
        alone = _registries(module)
        if module == "completion_cmd":  # click's completion scripts: nothing of mcpshim's
            continue
        if module == "sessions_cmd":  # lists sessions, names no rule: starts without them
            assert not alone["common"], alone
            continue
        assert alone.pop("common"), module
        assert alone == {k: v for k, v in whole.items() if k != "common"}, module


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
