"""Helpers for the tree/review/policy/baseline tests (no tests here).

`Lab` runs real commands through real shims (the shim dir first on PATH) and reviews the log
they wrote; `fake_exec` frames hand-written exec records only for cases no real run can make.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conftest import Home
from mcpshim.family import tree
from mcpshim.log import execlog
from mcpshim.paths import Locations
from mcpshim.review import engine as review
from mcpshim.review import policy
from mcpshim.review.findings import Finding
from mcpshim.shim import install, manifest


@dataclass
class Lab:
    home: Home

    @property
    def env(self) -> dict[str, str]:
        env = dict(self.home.env)
        env["PATH"] = f"{self.home.loc.shim_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        env.pop("MCPSHIM_SESSION", None)
        return env

    def install(
        self,
        *names: str,
        interpreter: str | None = None,
        targets: dict[str, str] | None = None,
        allow_unsafe: bool = False,
    ) -> None:
        install.install(
            self.home.loc,
            list(names),
            targets or {},
            interpreter=interpreter,
            allow_unsafe=allow_unsafe,
        )

    def run(
        self,
        argv: Sequence[str],
        cwd: Path | str | None = None,
        session: str | None = None,
        check: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        env = self.env
        if session is not None:
            env["MCPSHIM_SESSION"] = session
        return subprocess.run(
            list(argv),
            cwd=cwd or self.home.root,
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=check,
        )

    def review(
        self, pol: policy.Policy | None = None, session: str | None = None, **kw: object
    ) -> list[Finding]:
        problems: list[execlog.LogProblem] = []
        result = review.review(
            execlog.iter_records(self.home.loc, problems),
            policy=pol or policy.default_policy(),
            session=session,
            shim_dir=str(self.home.loc.shim_dir),
            manifest=manifest.load_manifest(self.home.loc.shim_dir),
            **kw,  # type: ignore[arg-type]
        )
        assert problems == []
        return result.findings

    def forest(self, session: str | None = None) -> tree.Forest:
        return tree.build_forest(tree.images(self.home.records(), session))


def ids(findings: Sequence[Finding]) -> set[str]:
    return {f.rule.id for f in findings}


def of(findings: Sequence[Finding], rule_id: str) -> list[Finding]:
    return [f for f in findings if f.rule.id == rule_id]


def policy_from(tmp_path: Path, text: str) -> policy.Policy:
    f = tmp_path / "policy.toml"
    f.write_text(text)
    return policy.load_policy(f)


def fake_exec(
    loc: Locations,
    *,
    boot: str,
    pid: int,
    ppid: int,
    start: int,
    args: Sequence[str] = ("--version",),
    shim: str = "git",
    target: str = "/usr/bin/git",
    cwd: str = "/",
    uptime: float | None = None,
    session: str = "",
) -> None:
    """Append one exec record framed exactly as a shim frames it."""
    up = uptime if uptime is not None else start / execlog.CLK_TCK
    fields = [
        b"1700000000",
        f"{up:.2f}".encode(),
        boot.encode(),
        str(pid).encode(),
        str(ppid).encode(),
        str(start).encode(),
        b"",
        cwd.encode(),
        shim.encode(),
        target.encode(),
        str(loc.shim_dir / shim).encode(),
        session.encode(),
        b"/usr/bin:/bin",
        b"",
    ]
    # Fields added after the redactions (and before argc) stay empty, like a shim's would.
    fields += [b""] * (int(getattr(execlog, "_EXEC_FIELDS", 15)) - 1 - len(fields))
    fields += [str(len(args)).encode(), *(a.encode() for a in args)]
    loc.log_dir.mkdir(parents=True, exist_ok=True)
    with open(loc.log_file, "ab") as fh:
        fh.write(execlog.encode_record("exec", fields))
