"""One voice across commands: help for every option, --format choices in one order, click's
usage errors in mcpshim's error style, shell completion, a self-explaining policy init."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest

from mcpshim.cli import cli
from mcpshim.cli.common import FORMAT_ORDER
from mcpshim.review import policy

MCPSHIM = [sys.executable, "-m", "mcpshim"]


def _commands(cmd: click.Command, path: str = "mcpshim") -> Iterator[tuple[str, click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):  # through click's API: the CLI loads commands on use
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from _commands(sub, f"{path} {name}")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPSHIM, *args], capture_output=True, text=True, timeout=120)


def test_every_option_has_help() -> None:
    missing = [
        f"{path} {p.opts[0]}"
        for path, cmd in _commands(cli)
        for p in cmd.params
        if isinstance(p, click.Option) and not p.help and p.name not in ("help", "version")
    ]
    assert missing == []


def test_format_choices_in_one_order_everywhere() -> None:
    seen = 0
    for path, cmd in _commands(cli):
        for p in cmd.params:
            if isinstance(p, click.Option) and "--format" in p.opts:
                assert isinstance(p.type, click.Choice), path
                choices = list(p.type.choices)
                assert choices == sorted(choices, key=FORMAT_ORDER.index), path
                seen += 1
    assert seen >= 10


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["review", "--fail-on", "urgent"], "Invalid value for '--fail-on'"),
        (["nosuch"], "No such command 'nosuch'"),
        (["log", "--pid", "x"], "'x' is not a valid integer"),
        (["sessions", "--bogus"], "No such option '--bogus'"),
    ],
)
def test_click_usage_errors_speak_as_mcpshim_errors(argv: list[str], said: str) -> None:
    done = _cli(*argv)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("mcpshim: error: ") and said in line
    assert "--help`)" in line


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    done = _cli("completion", shell)
    assert done.returncode == 0 and "_MCPSHIM_COMPLETE" in done.stdout


def test_completion_completes() -> None:
    env = {"_MCPSHIM_COMPLETE": "bash_complete", "COMP_WORDS": "mcpshim ses", "COMP_CWORD": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "from mcpshim.cli import main; main()"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["plain,sessions"]
    env = {**env, "COMP_WORDS": "mcpshim review --format ", "COMP_CWORD": "3"}
    done = subprocess.run(
        [sys.executable, "-c", "from mcpshim.cli import main; main()"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["plain,text", "plain,json", "plain,sarif"]


def test_policy_init_explains_itself_without_pointing_at_a_source_file() -> None:
    text = _cli("policy", "init").stdout
    assert "policy.example.toml" not in text and "sources" not in text
    lines = text.splitlines()
    for key in ("trusted_dirs", "temp_dirs", "sensitive_commands", "cwd_roots", "strict_commands"):
        i = next(i for i, x in enumerate(lines) if x.startswith(f"{key} = "))
        assert lines[i - 1].startswith("# "), key  # each key says what it does
    for table in ("[severity]", "[network]", "# [commands.git]", "# [[ignore]]", "# [tools]"):
        assert table in lines
    assert policy.starter_dict()["commands"] == {}  # an example only: nothing narrowed
