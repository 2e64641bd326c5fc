"""The table of file locations that matter in a `mcpshim run` session (log.filetable: its
HOME, workspace and PATH, the policy's additions), for --trace-files and --contain (the
ruleset is cli.runlock's). Imported only when one of those is asked for."""

from __future__ import annotations

import os
from pathlib import Path

from mcpshim.cli.common import load_policy
from mcpshim.log.filetable import FileTable, Roots, entries
from mcpshim.supervise.supervisor import Supervisor

__all__ = ["file_table"]


def file_table(sup: Supervisor, policy_file: Path | None) -> FileTable:
    """The locations that matter in this session: its HOME, workspace and PATH (the shim
    directory left out), and what the policy's [files] adds."""
    pol = load_policy(policy_file)
    shims = {str(sup.loc.shim_dir), os.path.realpath(sup.loc.shim_dir)}
    dirs = [d for d in sup.path.split(os.pathsep) if d and d not in shims]
    roots = Roots.of(sup.env, os.getcwd(), dirs)
    return FileTable(roots, entries(pol.files.credentials, pol.files.persistence))
