"""mcpshim completion: click's shell completion scripts."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

__all__ = ["COMMANDS"]


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (commands, options, choices).

    \b
    bash: echo 'eval "$(mcpshim completion bash)"' >> ~/.bashrc
    zsh:  echo 'eval "$(mcpshim completion zsh)"' >> ~/.zshrc
    fish: mcpshim completion fish > ~/.config/fish/completions/mcpshim.fish
    """
    root = ctx.find_root().command
    cls = get_completion_class(shell)
    assert cls is not None  # the three click ships
    click.echo(cls(root, {}, "mcpshim", "_MCPSHIM_COMPLETE").source())


COMMANDS = [completion]
