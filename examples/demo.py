"""The quick-start demonstration, on a throwaway HOME that is deleted afterwards.

Installs shims, runs a few commands through them the way an MCP server's tool would (a plain
`git`, a tricky argument, a composed `sh -c` line, a token on a command line), then shows
what mcpshim recorded.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from mcpshim.display import quote_argv


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="mcpshim-demo-") as tmp:
        home = Path(tmp)
        env = {
            **os.environ,
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_STATE_HOME": str(home / ".local/state"),
        }
        env.pop("MCPSHIM_SESSION", None)

        def mcpshim(*args: str) -> None:
            print(f"\n$ mcpshim {shlex.join(args)}", flush=True)
            subprocess.run([sys.executable, "-m", "mcpshim", *args], env=env, check=False)

        mcpshim("install")
        shim_dir = home / ".local/share/mcpshim/shims"
        server_env = {**env, "PATH": f"{shim_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        repo = home / "repo"
        repo.mkdir()
        token = "ghp_" + "Z" * 36
        steps = [
            ["git", "init", "-q"],
            [
                "git",
                "-c",
                "user.name=demo",
                "-c",
                "user.email=d@example",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "subject\n\x1b[31mred text\x1b[0m and a 'quote'",
            ],
            ["sh", "-c", "git status --short; git log --oneline | head -1 >/dev/null; echo done"],
            ["git", "-c", f"http.extraHeader=Authorization: Bearer {token}", "--version"],
        ]
        print("\n# a server's tool runs these through PATH (the shims come first):")
        for argv in steps:
            print(f"$ {quote_argv(argv)}", flush=True)
            subprocess.run(argv, cwd=repo, env=server_env, check=False, stdout=subprocess.DEVNULL)
        mcpshim("log")
        mcpshim("list")
        log = home / ".local/state/mcpshim/log/exec.log"
        print(f"\n# the raw log holds the token? {token.encode() in log.read_bytes()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
