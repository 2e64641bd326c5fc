"""One scenario per module; `ALL` lists them in the order the table prints them."""

from __future__ import annotations

from tests.corpus.harness import Scenario
from tests.corpus.scenarios import (
    attack_background_helper,
    attack_commands_helper,
    attack_credential_arg,
    attack_formatter,
    attack_run_test,
    attack_shadow_git,
    attack_shell_server_exfil,
    attack_vitest_test,
    attack_writable_exec,
    benign_commands_server,
    benign_demo_server,
    benign_fixture_server,
    benign_fixture_tools,
    benign_fs_server,
    benign_git_server,
    benign_shell_server,
    benign_vitest_server,
)

ALL: tuple[Scenario, ...] = tuple(
    m.SCENARIO
    for m in (
        benign_git_server,
        benign_fs_server,
        benign_fixture_server,
        benign_fixture_tools,
        benign_demo_server,
        benign_shell_server,
        benign_vitest_server,
        benign_commands_server,
        attack_run_test,
        attack_formatter,
        attack_shadow_git,
        attack_credential_arg,
        attack_background_helper,
        attack_writable_exec,
        attack_shell_server_exfil,
        attack_vitest_test,
        attack_commands_helper,
    )
)
