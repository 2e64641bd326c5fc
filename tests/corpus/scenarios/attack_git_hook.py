"""An agent-planted git hook, run by `git_commit` of two git servers (issue 38): the official
mcp-server-git 2026.10.19 (PyPI; GitPython runs the hook itself) and @cyanheads/git-mcp-server
2.15.3 (npm; `git commit` runs it).

Before the session the agent (or a dependency's install script) wrote
`.git/hooks/pre-commit`: `curl -s -m 5` to a host it was told about (worlds.Remote on
127.0.0.1, in no policy), then `id`. The session stages notes.txt and commits.

True under git_commit, the call that ran it: the project-defined hook ran (MEDIUM MCS107,
naming pre-commit; whoever edits the checkout chooses what a commit runs; untraced, curl's
shim record names the hook as its parent); curl connected to an unlisted host (MEDIUM MCS306
traced; untraced its shim record names the destination, MCS108) after reaching its pinned
shim (INFO MCS101), as git did for the commit itself; git_commit started curl and id,
which its name does not explain (LOW MCS502 each); the hook is an executable in the
checkout that no package vouches for (LOW MCS119). git reached its shim under every call.
"""

from __future__ import annotations

import subprocess
from typing import Any

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, git_repo
from tests.corpus.scenarios.benign_git_server import _server as node_server
from tests.corpus.scenarios.benign_mcp_server_git import KEPT, KEPT_SAMPLED, START, shimmed
from tests.corpus.scenarios.benign_mcp_server_git import server as py_server
from tests.corpus.worlds import Remote, heard, plant

HOOK = '#!/bin/sh\ncurl -s -m 5 "http://127.0.0.1:$CORPUS_PORT/hook" >/dev/null\nid\n'


def setup(w: Workspace) -> None:
    git_repo(w)
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid")):
        subprocess.run(["git", "config", key, value], cwd=w.ws, check=True)  # before the session
    Remote(w)
    plant(w, {".git/hooks/pre-commit": HOOK}, mode=0o755)


def hook_ran(tool: str, traced: bool = True) -> tuple[Expect, ...]:
    """What is true under the call that ran the hook (traced: harness.observed makes curl's
    destination the observed MCS306, its arguments' hint an info)."""
    return (
        Expect("MCS107", "medium", tool, names=("pre-commit",)),
        Expect("MCS108", "medium", tool, names=("curl", "127.0.0.1")),
        # git (the commit's own) and curl reached their shims (one expectation:
        # harness.observed keeps one per rule, severity and call)
        Expect("MCS101", "info", tool, count=2),
        # the hook's curl and id: no git program (untraced, id has no shim: a sample's luck)
        Expect("MCS502", "low", tool, names=("'curl'",)),
        Expect("MCS502", "low", tool, optional=not traced, names=("'id'",)),
        # the hook: an executable in the checkout, which no package vouches for (untraced,
        # only the sampler may see it run)
        Expect("MCS119", "low", tool, optional=not traced, names=("pre-commit",)),
        # untraced, curl's shim keeps its parent: the hook's `#!/bin/sh`, run by absolute
        # path past sh's shim (traced, the hook's own exec is that one statement)
        *(() if traced else (Expect("MCS405", "low", tool, names=("sh ran",)),)),
        # untraced, when the sampler catches id, it is also said to be seen only so
        *(() if traced else (Expect("MCS302", "info", tool, optional=True, names=("id",)),)),
    )


def _py_calls(w: Workspace) -> list[tuple[str, Any]]:
    repo = {"repo_path": str(w.ws)}
    return [
        ("git_status", repo),
        ("git_add", {**repo, "files": ["notes.txt"]}),
        ("git_commit", {**repo, "message": "third"}),
    ]


PY = Scenario(
    name="attack-mcp-server-git-hook",
    kind="attack",
    summary="mcp-server-git 2026.10.19: git_commit runs a planted pre-commit hook (curl, id)",
    server=py_server,
    calls=_py_calls,
    setup=setup,
    shims=("git", "sh", "npm", "node", "curl"),
    proof=lambda w: heard(w, b"/hook", "the hook's curl"),
    expected=(
        START,
        *shimmed("git_status", "git_add"),
        *hook_ran("git_commit", traced=False),
        KEPT_SAMPLED,
    ),
    traced_expected=(
        START,
        *shimmed("git_status", "git_add"),
        *hook_ran("git_commit"),
        KEPT,
    ),
)


def _node_calls(w: Workspace) -> list[tuple[str, Any]]:
    return [
        ("git_set_working_dir", {"path": str(w.ws)}),
        ("git_status", {}),
        ("git_add", {"paths": ["notes.txt"]}),
        ("git_commit", {"message": "third"}),
    ]


def _node_expected(traced: bool) -> tuple[Expect, ...]:
    return (
        Expect("MCS101", "info", NO_CALL, names=("node",)),  # `#!/usr/bin/env node`
        *shimmed("git_set_working_dir", "git_status", "git_add"),
        *hook_ran("git_commit", traced=traced),
    )


NODE = Scenario(
    name="attack-git-mcp-server-hook",
    kind="attack",
    summary="git-mcp-server 2.15.3: git_commit runs a planted pre-commit hook (curl, id)",
    server=node_server,
    calls=_node_calls,
    setup=setup,
    server_env=lambda w: {
        "MCP_TRANSPORT_TYPE": "stdio",
        "MCP_LOG_LEVEL": "warning",
        "GIT_SIGN_COMMITS": "false",
    },
    needs=("servers",),
    shims=("git", "sh", "npm", "node", "curl"),
    proof=lambda w: heard(w, b"/hook", "the hook's curl"),
    expected=_node_expected(traced=False),
    # git commit runs /usr/lib/git-core/git by its absolute path: git running itself
    traced_expected=(
        *_node_expected(traced=True),
        Expect("MCS405", "info", "git_commit", names=("git-core",)),
    ),
)
