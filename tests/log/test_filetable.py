"""The table of file locations that matter (issue 40): each entry the issue names is in it,
its patterns match what they say and nothing beside it, a policy adds to it, what it
names on this disk is found (what `run --contain` refuses reading), and the project's
configuration is the workspace's own (never a home's, nor what a package manager keeps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpshim.log.filetable import CREDENTIAL, PERSISTENCE, PROJECT, FileTable, Roots, entries

HOME = "/home/u"
WS = "/work/repo"


@pytest.fixture
def table() -> FileTable:
    roots = Roots((HOME,), WS, path_dirs=("/home/u/.local/bin", "/usr/bin"))
    return FileTable(roots)


@pytest.mark.parametrize(
    ("path", "label", "private"),
    [
        ("/home/u/.ssh/id_ed25519", "SSH private key", True),
        ("/home/u/.ssh/id_rsa", "SSH private key", True),
        ("/home/u/.ssh/deploy.pem", "SSH private key", True),
        ("/home/u/.ssh/config", "SSH client configuration", False),
        ("/home/u/.aws/credentials", "AWS credentials", False),
        ("/home/u/.config/gcloud/application_default_credentials.json",
         "Google Cloud credentials", False),
        ("/home/u/.azure/msal_token_cache.json", "Azure CLI credentials", False),
        ("/home/u/.kube/config", "Kubernetes configuration", False),
        ("/home/u/.docker/config.json", "Docker registry credentials", False),
        ("/home/u/.netrc", "netrc", False),
        ("/home/u/.npmrc", "npm credentials", False),
        ("/home/u/.pypirc", "PyPI credentials", False),
        ("/home/u/.git-credentials", "git credential store", False),
        ("/home/u/.config/gh/hosts.yml", "GitHub CLI tokens", False),
        ("/home/u/.gnupg/private-keys-v1.d/ABCD.key", "GnuPG private key", True),
        ("/home/u/.local/share/keyrings/login.keyring", "keyring", False),
        ("/home/u/.mozilla/firefox/x.default/cookies.sqlite", "browser cookie or login store",
         False),
        ("/home/u/.config/google-chrome/Default/Network/Cookies",
         "browser cookie or login store", False),
        ("/home/u/.config/chromium/Profile 1/Login Data", "browser cookie or login store",
         False),
        ("/work/repo/.env", "environment file in the workspace", False),
        ("/work/repo/services/api/.env.production", "environment file in the workspace", False),
    ],
)  # fmt: skip
def test_each_credential_location(table: FileTable, path: str, label: str, private: bool) -> None:
    place = table.credential(path)
    assert place is not None and (place.kind, place.label, place.private_key) == (
        CREDENTIAL, label, private,
    )  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [
        "/home/u/.ssh/id_ed25519.pub",  # a public key
        "/home/u/.ssh/known_hosts",
        "/home/u/.aws/config",
        "/home/u/.gnupg/pubring.kbx",
        "/work/repo/.env.example",
        "/elsewhere/.env",  # not in the workspace
        "/home/u/.npmrc.bak",
        "relative/.netrc",  # only absolute paths are matched
    ],
)
def test_what_is_no_credential(table: FileTable, path: str) -> None:
    assert table.credential(path) is None


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/var/spool/cron/crontabs/u", "crontab"),
        ("/etc/cron.d/job", "crontab"),
        ("/home/u/.config/systemd/user/evil.service", "systemd unit"),
        ("/home/u/.config/autostart/evil.desktop", "XDG autostart entry"),
        ("/home/u/.bashrc", "shell start-up file"),
        ("/home/u/.profile", "shell start-up file"),
        ("/home/u/.zshrc", "shell start-up file"),
        ("/home/u/.config/fish/config.fish", "shell start-up file"),
        ("/home/u/.ssh/authorized_keys", "SSH authorized keys"),
        ("/work/repo/.git/hooks/pre-commit", "git hook"),
        ("/home/u/.gitconfig", "git configuration"),
        ("/work/repo/.git/config", "git configuration"),
        ("/home/u/.local/bin/git", "a directory on PATH"),
    ],
)
def test_each_place_that_runs_later(table: FileTable, path: str, label: str) -> None:
    place = table.persistence(path)
    assert place is not None and (place.kind, place.label) == (PERSISTENCE, label)


def test_what_is_no_place_that_runs_later(table: FileTable) -> None:
    assert table.persistence("/work/repo/.git/hooks/pre-commit.sample") is None
    assert table.persistence("/work/repo/.git/index") is None
    assert table.persistence("/home/u/.local/bin/sub/x") is None  # beneath, not in, PATH
    # git's own writes to its configuration are judged by its arguments (review)
    assert table.persistence("/work/repo/.git/config", program="git") is None
    assert table.persistence("/home/u/.gitconfig", program="python3") is not None


def test_a_policy_adds_to_the_table() -> None:
    roots = Roots((HOME,), WS)
    table = FileTable(roots, entries(["~/.config/acme/token"], ["{workspace}/.husky/*"]))
    cred = table.credential("/home/u/.config/acme/token")
    assert cred is not None and cred.label == "credential file (policy)"
    assert table.persistence("/work/repo/.husky/pre-push") is not None
    assert FileTable(roots).credential("/home/u/.config/acme/token") is None


def test_the_files_named_here_are_found(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("k")
    (home / ".ssh" / "id_ed25519.pub").write_text("p")
    (home / ".config" / "gcloud").mkdir(parents=True)
    (ws / "api").mkdir(parents=True)
    (ws / "api" / ".env").write_text("X=1")
    (ws / "node_modules" / "dep").mkdir(parents=True)
    (ws / "node_modules" / "dep" / ".env").write_text("not looked for")
    table = FileTable(Roots((str(home),), str(ws)))
    found = dict(table.credential_files())
    assert sorted(found) == sorted([str(home / ".ssh" / "id_ed25519"),
                                    str(home / ".config" / "gcloud"),
                                    str(ws / "api" / ".env")])  # fmt: skip
    assert str(ws / "api" / ".env") not in dict(table.credential_files(workspace=False))


@pytest.mark.parametrize(
    "path",
    ["/work/repo/.claude/cclsp.json", "/work/repo/tool.json", "/work/repo/pyproject.toml",
     "/work/repo/.github/workflows/ci.yml", "/work/repo/tox.ini", "/work/repo/setup.cfg",
     "/work/repo/.eslintrc", "/work/repo/packages/api/tsconfig.json"],
)  # fmt: skip
def test_the_projects_configuration(table: FileTable, path: str) -> None:
    place = table.project(path)
    assert place is not None and (place.kind, place.label) == (PROJECT, "project configuration")


def test_what_is_no_project_configuration(table: FileTable) -> None:
    for path in ("/work/repo/node_modules/dep/package.json", "/work/repo/.git/config",
                 "/work/repo/.venv/pyvenv.cfg", "/work/repo/package-lock.json",
                 "/work/repo/src/main.ts", "/work/repo/.env", "/home/u/.config/tool.json",
                 "/work/other/tool.json"):  # fmt: skip
        assert table.project(path) is None, path
    # a workspace that is a home directory or / is no project
    assert FileTable(Roots((HOME,), HOME)).project("/home/u/.config/claude/cclsp.json") is None
    assert FileTable(Roots((HOME,), "/")).project("/etc/app.json") is None
