"""mcp-server-git 2026.10.19 (PyPI, pinned; the official reference git server, GitPython): an
agent reads a repository, in two call orders.

Each tool opens the repository with GitPython and runs git through PATH: `git status`, `git
diff` as one-off commands; object reads (log, show) go through `git cat-file --batch` and
`--batch-check`, which GitPython starts once per Repo object and keeps until Python collects
it: helpers that live past the call that started them.

True: git was found through PATH and reached its pinned shim under every call, and at the
server's start (GitPython asks `git version`) (INFO MCS101); the cat-file helpers are
helpers the server keeps (INFO MCS501 once for the server, gone by the session's end), never
a MEDIUM finding per call. Nothing here is worth a reviewer's decision. The second order
(show, log, branch, status, diff) must say the same of the same calls.
"""

from __future__ import annotations

from typing import Any

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, git_repo
from tests.corpus.worlds import mcp2_installed


def server(w: Workspace) -> list[str]:
    return [str(mcp2_installed() / "mcp-server-git"), "--repository", str(w.ws)]


def _reads(w: Workspace) -> list[tuple[str, Any]]:
    repo = {"repo_path": str(w.ws)}
    return [
        ("git_status", repo),
        ("git_log", {**repo, "max_count": 3}),
        ("git_diff_unstaged", repo),
        ("git_show", {**repo, "revision": "HEAD"}),
    ]


def _reordered(w: Workspace) -> list[tuple[str, Any]]:
    repo = {"repo_path": str(w.ws)}
    return [
        ("git_show", {**repo, "revision": "HEAD~1"}),
        ("git_log", {**repo, "max_count": 2}),
        ("git_branch", {**repo, "branch_type": "local"}),
        ("git_status", repo),
        ("git_diff_unstaged", repo),
    ]


def shimmed(*tools: str) -> tuple[Expect, ...]:
    """git through PATH reached its shim, under each of these calls."""
    return tuple(Expect("MCS101", "info", t, names=("git",)) for t in tools)


KEPT = Expect("MCS501", "info", NO_CALL, names=("cat-file",))  # GitPython's helpers
START = Expect("MCS101", "info", NO_CALL, names=("git",))  # `git version`, at the start
KEPT_SAMPLED = Expect("MCS501", "info", NO_CALL, optional=True, names=("cat-file",))

SCENARIO = Scenario(
    name="benign-mcp-server-git",
    kind="benign",
    summary="mcp-server-git 2026.10.19: status, log, diff, show (GitPython)",
    server=server,
    calls=_reads,
    setup=git_repo,
    expected=(
        START,
        *shimmed("git_status", "git_log", "git_diff_unstaged", "git_show"),
        KEPT_SAMPLED,
    ),
    traced_expected=(
        START,
        *shimmed("git_status", "git_log", "git_diff_unstaged", "git_show"),
        KEPT,
    ),
)

REORDERED = Scenario(
    name="benign-mcp-server-git-reordered",
    kind="benign",
    summary="mcp-server-git 2026.10.19: show, log, branch, status, diff (another order)",
    server=server,
    calls=_reordered,
    setup=git_repo,
    expected=(
        START,
        *shimmed("git_show", "git_log", "git_branch", "git_status", "git_diff_unstaged"),
        KEPT_SAMPLED,
    ),
    traced_expected=(
        START,
        *shimmed("git_show", "git_log", "git_branch", "git_status", "git_diff_unstaged"),
        KEPT,
    ),
)
