"""A UTF-8 byte order mark at the start of a file a person edits: every TOML file mcpshim reads
takes it as the JSON client configs do (an editor on Windows writes one), and an error in such
a file still names the line it is on."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mcpshim.cli import main
from mcpshim.contract import lockfile
from mcpshim.errors import InputError
from mcpshim.log import retention
from mcpshim.review import baseline, policy
from mcpshim.shim.manifest import load_manifest
from tests.fixtures.home import Home, install

BOM = "\ufeff"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exit_.value.code
    return (code if isinstance(code, int) else 0), out, err


def test_policy_with_a_bom_is_read_like_the_json_config_beside_it(
    home: Home, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(home, ["true"])
    pol = tmp_path / "policy.toml"
    pol.write_text(BOM + policy.dumps_starter(), encoding="utf-8")
    config = tmp_path / "mcp.json"
    config.write_text(BOM + json.dumps({"mcpServers": {"s": {"command": "/bin/true"}}}))
    code, _, err = _cli(capsys, "lint-path", "--config", str(config))
    assert code == 1, err  # the JSON config: read (a launch line at medium: findings)
    loc = ["--dir", str(home.loc.shim_dir), "--log-dir", str(home.loc.log_dir)]
    code, _, err = _cli(capsys, "review", *loc, "--policy", str(pol))
    assert code == 0, err  # the TOML policy: read too (an empty log: clean)
    assert "not valid TOML" not in err
    plain = policy.load_policy(_plain(pol, tmp_path))
    assert dataclasses.replace(policy.load_policy(pol), source=plain.source) == plain


def _plain(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / f"plain-{path.name}"
    out.write_text(path.read_text(encoding="utf-8").removeprefix(BOM), encoding="utf-8")
    return out


def test_an_error_after_a_bom_names_its_line(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(BOM + "colour = 'red'\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        policy.load_policy(f)
    assert str(err.value).startswith(f"{f}:1: policy key colour:")


def test_baseline_lock_log_config_and_manifest_with_a_bom(home: Home, tmp_path: Path) -> None:
    base = tmp_path / "b.toml"
    base.write_text(BOM + "version = 1\ncwd_roots = ['/w']\n", encoding="utf-8")
    assert baseline.load_baseline(base).cwd_roots == ("/w",)
    lock = tmp_path / "mcpshim.lock"
    lock.write_text(BOM + lockfile.dumps_lock(lockfile.Lock()), encoding="utf-8")
    assert lockfile.load_lock(lock).servers == {}
    cfg = tmp_path / "config.toml"
    cfg.write_text(BOM + "[log]\nkeep = 3\n", encoding="utf-8")
    assert retention.load_settings(cfg).keep == 3
    install(home, ["true"])
    manifest = home.loc.shim_dir / "manifest.toml"
    manifest.write_text(BOM + manifest.read_text(encoding="utf-8"), encoding="utf-8")
    m = load_manifest(home.loc.shim_dir)
    assert m is not None and "true" in m.shims
