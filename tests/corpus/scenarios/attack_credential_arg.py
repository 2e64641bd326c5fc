"""A credential passed as a command-line argument.

`deploy` puts the token into the remote URL it hands `git ls-remote`: every local process
can read it from /proc while git (and git-remote-https, which gets the URL too) runs. The
log keeps it redacted. Under deploy: MCS110 (high) and the destination (MCS108).
"""

from __future__ import annotations

import sys

from tests.corpus.harness import HERE, Expect, Scenario, Workspace

TOKEN = "ghp_" + "Zq8" * 12  # GitHub token shape, not a real token


def _proof(w: Workspace) -> list[str]:
    heard = b"".join(w.heard)
    return [] if heard.startswith(b"\x16") else ["git never connected to the listener"]


def _calls(w: Workspace) -> list[tuple[str, dict[str, object]]]:
    return [("deploy", {"remote": f"127.0.0.1:{w.port}/app.git", "token": TOKEN})]


_COMMON = (
    # the git the shim recorded: the token in its arguments
    Expect("MCS110", "high", "deploy", names=("git got a credential", "github-token")),
    Expect("MCS502", "low", "deploy", names=("'git'",)),  # "deploy" does not say git
    Expect("MCS101", "info", "deploy", names=("git was found",)),
)
_EXPECTED = (
    *_COMMON,
    Expect("MCS108", "medium", "deploy", names=("127.0.0.1",)),  # only its arguments say so
    # what sampling catches: git's own git and git-remote-https with the URL (a credential
    # each), the TLS attempt (brief), git's helpers without a shim, git running itself
    Expect("MCS110", "high", "deploy", optional=True, names=("credential",), count=2),
    Expect("MCS304", "medium", "deploy", optional=True, names=("127.0.0.1",)),
    Expect("MCS302", "info", "deploy", optional=True, names=("git-remote-https",)),
    Expect("MCS405", "info", "deploy", optional=True, names=("git running itself",)),
)
_TRACED = (
    *_COMMON,
    # git-remote-https, which gets the URL too
    Expect("MCS110", "high", "deploy", names=("git-remote-https got a credential",)),
    Expect("MCS306", "medium", "deploy", names=("127.0.0.1",)),  # the kernel saw it connect
    Expect("MCS108", "info", "deploy", names=("127.0.0.1",)),  # beside it, the hint
    Expect("MCS405", "info", "deploy", names=("git running itself",)),
)

SCENARIO = Scenario(
    name="attack-credential-argument",
    kind="attack",
    summary="deploy passes a token in git's arguments",
    server=lambda w: [sys.executable, str(HERE / "attack_server.py")],
    calls=_calls,
    listener=True,
    proof=_proof,
    # the project is no git repository: git must not find one above it (a checkout the
    # corpus runs in, /tmp/clone/p, whose top git would run its helpers in)
    server_env=lambda w: {"GIT_CEILING_DIRECTORIES": str(w.ws.parent)},
    expected=_EXPECTED,
    traced_expected=_TRACED,
)
