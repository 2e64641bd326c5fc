"""Which names are credentials: the one grammar the sampler, `NAME=value` arguments,
`--name=value` options and JSON keys share (a name that ends with a credential word)."""

from __future__ import annotations

import pytest

from mcpshim.log.redact import credential_env_names, is_credential_key, is_credential_name

CREDENTIALS = [
    "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "DB_PASSWORD", "PGPASSWORD", "MYSQL_PWD", "OPENAI_API_KEY", "apiKey", "accessToken",
    "client_secret", "SECRET", "token", "password", "pass", "db_pass", "GH_PAT", "_auth",
    "SSHPASS", "GPG_PASSPHRASE", "authorization", "api-key", "x.private_key",
]  # fmt: skip
SETTINGS = [
    "AWS_CA_BUNDLE", "AWS_REGION", "AWS_PROFILE", "PASSWORD_FILE", "GITHUB_TOKEN_FILE",
    "tokenizer", "key", "monkey", "hotkey", "keyboard", "PWD", "OLDPWD", "PATH", "GOPATH",
    "bypass", "compass", "author", "oauth", "core.editor", "SSH_AUTH_SOCK", "HOME", "",
]  # fmt: skip


@pytest.mark.parametrize("name", CREDENTIALS)
def test_credential_names(name: str) -> None:
    assert is_credential_name(name) and is_credential_key(name)


@pytest.mark.parametrize("name", SETTINGS)
def test_setting_names(name: str) -> None:
    assert not is_credential_name(name)


def test_a_json_key_named_key_is_a_credential_but_not_a_variable() -> None:
    assert is_credential_key("key") and is_credential_key("KEY") and not is_credential_name("key")


def test_the_sampler_list_grades_paths_out() -> None:
    assert credential_env_names(["AWS_CA_BUNDLE", "GH_TOKEN", "HOME", "AWS_SECRET_ACCESS_KEY"]) == (
        "AWS_SECRET_ACCESS_KEY",
        "GH_TOKEN",
    )
