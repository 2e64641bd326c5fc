"""One scenario per module; `ALL` lists them in the order the table prints them."""

from __future__ import annotations

from tests.corpus.harness import Scenario
from tests.corpus.scenarios import (
    attack_background_helper,
    attack_credential_arg,
    attack_formatter,
    attack_run_test,
    attack_shadow_git,
    attack_writable_exec,
    benign_demo_server,
    benign_fixture_server,
    benign_fixture_tools,
    benign_fs_server,
    benign_git_server,
)

ALL: tuple[Scenario, ...] = tuple(
    m.SCENARIO
    for m in (
        benign_git_server,
        benign_fs_server,
        benign_fixture_server,
        benign_fixture_tools,
        benign_demo_server,
        attack_run_test,
        attack_formatter,
        attack_shadow_git,
        attack_credential_arg,
        attack_background_helper,
        attack_writable_exec,
    )
)
