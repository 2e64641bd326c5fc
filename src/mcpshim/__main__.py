"""`python -m mcpshim` and the `mcpshim` command.

`mcpshim run ...` starts its server before the rest of the command line is imported
(supervise.launch.prelaunch: a client waits for the server's first byte, and click and the
supervisor's modules take longer to load than most of what `run` does); the command click
parses then adopts the running session. Every other command goes straight to the CLI.
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["run"]:
        from mcpshim.supervise.launch import prelaunch

        prelaunch(sys.argv[2:])
    from mcpshim.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
