"""Every versioned output has a JSON Schema under docs/schemas/, and each schema holds the
real output of the real CLI: one traced, relayed session (the SDK's client drives the tools
fixture server through `mcpshim run --mcp`: an `npm test` chain that leaves a helper
behind, git, a connection to a local listener, a tool that does not exist), then every
command that prints or writes a versioned format, run on it. Each schema is shown to
reject a document that lost a required field, so none of them holds vacuously."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fixtures.home import REPO, SRC, Home, install
from tests.fixtures.mcpscenario import SHIMS, TOOLS, make_package, quiet_npm_env
from tests.fixtures.nethelp import listening
from tests.fixtures.runhelp import events, needs_trace, poll

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMAS = REPO / "docs" / "schemas"
MCPSHIM = [sys.executable, "-m", "mcpshim"]
#: each schema file and the `"schema"` value its documents carry (None: the TOML files,
#: versioned by their `version` key, and ECS documents, which carry ECS's own fields)
NAMES = {
    "findings-1": "mcpshim.findings/1",
    "tree-1": "mcpshim.tree/1",
    "log-1": "mcpshim.log/1",
    "ecs-1": None,
    "sessions-1": "mcpshim.sessions/1",
    "rules-1": "mcpshim.rules/1",
    "snapshot-1": "mcpshim.snapshot/1",
    "verify-1": "mcpshim.verify/1",
    "anchors-1": "mcpshim.anchors/1",
    "seal-state-1": "mcpshim.seal-state/1",
    "lock-1": None,
    "baseline-1": None,
}


def _validator(name: str) -> Any:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _toml_data(path: Path) -> dict[str, Any]:
    """A TOML file as a TOML reader returns it, datetimes as RFC 3339 text (JSON has none)."""

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v.isoformat() if isinstance(v, datetime.date | datetime.time) else v

    return dict(plain(tomllib.loads(path.read_text())))


def _session(home: Home, tmp: Path, port: int) -> str:
    install(home, SHIMS)
    pkg = make_package(tmp)
    code = f'import socket; socket.create_connection(("127.0.0.1", {port})).close()'
    connect = f"{sys.executable} -c '{code}'"
    run = ["run", "--dir", str(home.loc.shim_dir), "--mcp", "--on-exit", "terminate",
           "--grace", "1", "--trace-files", "--", sys.executable, str(TOOLS)]  # fmt: skip
    params = StdioServerParameters(
        command=MCPSHIM[0], args=[*MCPSHIM[1:], *run], env=quiet_npm_env(home.env)
    )

    async def drive() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            assert not (await s.call_tool("run_test", {"package_dir": str(pkg)})).is_error
            assert not (await s.call_tool("git_version", {})).is_error
            assert not (await s.call_tool("shell", {"line": connect})).is_error
            probe = 'cat "$HOME/.netrc" 2>/dev/null; true'  # a credential file's open (ENOENT)
            assert not (await s.call_tool("shell", {"line": probe})).is_error
            assert (await s.call_tool("no_such_tool", {})).is_error

    anyio.run(drive)
    [start] = poll(lambda: events(home, "session-end") and events(home, "session-start"), "end")
    return str(start["session"])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Any]]]:
    """Each schema's documents, from the real CLI over one real session."""
    from tests.fixtures.home import home_at, home_env, home_environ

    root = tmp_path_factory.mktemp("schemas")
    (root / "home").mkdir()
    home = home_at(root / "home", home_env(root / "home"))
    got: dict[str, list[Any]] = {name: [] for name in NAMES}

    def cli(*argv: str, code: int = 0) -> str:
        """The real CLI in the home (its default shim and log dirs are the home's)."""
        done = subprocess.run([*MCPSHIM, *argv], env=home.env, capture_output=True, text=True)
        assert done.returncode == code, (argv, done.stderr)
        return done.stdout

    with home_environ(home), listening() as port:
        sid = _session(home, root, port)
        got["findings-1"].append(
            json.loads(cli("review", "--session", sid, "--format", "json", code=1))
        )
        lint = subprocess.run([*MCPSHIM, "lint-path", ":/usr/bin", "--format", "json"],
                              env=home.env, capture_output=True, text=True)  # fmt: skip
        assert lint.returncode == 1, lint.stderr
        got["findings-1"].append(json.loads(lint.stdout))
        got["tree-1"].append(json.loads(cli("tree", "--session", sid, "--format", "json")))
        log = cli("log", "--session", sid, "--format", "json")
        got["log-1"] += [json.loads(line) for line in log.splitlines()]
        ecs = cli("log", "--session", sid, "--format", "ecs")
        got["ecs-1"] += [json.loads(line) for line in ecs.splitlines()]
        got["sessions-1"].append(json.loads(cli("sessions", "--format", "json")))
        got["rules-1"].append(json.loads(cli("rules", "--format", "json")))
        lock, baseline = root / "mcpshim.lock", root / "baseline.toml"
        cli("approve", "--session", sid, "--yes", "--lock", str(lock))
        got["lock-1"].append(_toml_data(lock))
        cli("baseline", "save", "--session", sid, "-o", str(baseline))
        got["baseline-1"].append(_toml_data(baseline))
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            snap = subprocess.run([*MCPSHIM, "snapshot", str(sleeper.pid), "--format", "json",
                                   "-o", "-"], env=home.env, capture_output=True, text=True,
                                  check=True)  # fmt: skip
        finally:
            sleeper.kill()
            sleeper.wait()
        got["snapshot-1"].append(json.loads(snap.stdout))
        anchors = root / "anchors.txt"
        init = cli("log", "seal", "--init", "--anchor-cmd", f"cat >> {anchors}")
        verifier = re.search(r"mcpshim-verifier-1:\S+", init)
        assert verifier is not None, init
        got["verify-1"].append(
            json.loads(cli("log", "verify", "--key", verifier.group(0), "--format", "json"))
        )
        poll(lambda: anchors.is_file() and "mcpshim_seal" in anchors.read_text(), "an anchor")
        got["anchors-1"].append(
            json.loads(cli("log", "anchors", "--from", str(anchors), "--format", "json"))
        )
        [state] = (home.root / ".local/state/mcpshim/seal").glob("*.json")
        got["seal-state-1"].append(json.loads(state.read_text()))
    yield got


@needs_trace
@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_schema_holds_the_real_output(outputs: dict[str, list[Any]], name: str) -> None:
    docs = outputs[name]
    assert docs, f"no real output for {name}"
    validator = _validator(name)
    for doc in docs:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert errors == [], errors[:5]
        if NAMES[name] is not None:
            assert doc["schema"] == NAMES[name]
        # not vacuous: the same document without a field it must have is refused
        must = "version" if name in ("lock-1", "baseline-1") else "schema"
        if name == "ecs-1":
            must = "event"
        assert not validator.is_valid({k: v for k, v in doc.items() if k != must})


@needs_trace
def test_the_session_covers_what_the_schemas_describe(outputs: dict[str, list[Any]]) -> None:
    """The output the schemas were held to has the parts they describe: calls, coverage,
    a process's socket call, a network and a file ECS document, an anchor, a tool's
    executables."""
    [review, _] = outputs["findings-1"]
    assert review["calls"] and review["coverage"] and review["findings"]
    datasets = {d["event"]["dataset"] for d in outputs["ecs-1"]}
    assert datasets >= {"mcpshim.exec", "mcpshim.net", "mcpshim.file"}
    assert {d["kind"] for d in outputs["log-1"]} >= {"exec", "session-start", "mcp-request"}
    assert outputs["anchors-1"][0]["anchors"]
    [lock] = outputs["lock-1"]
    assert any(t.get("executables") for s in lock["servers"].values() for t in s["tools"].values())


def test_every_versioned_output_has_a_schema() -> None:
    """A `mcpshim.NAME/N` the source writes has docs/schemas/NAME-N.schema.json, and each
    file there is one the test above holds."""
    written = set()
    for path in (SRC / "mcpshim").rglob("*.py"):
        written |= set(re.findall(r'"(mcpshim\.[a-z-]+/\d+)"', path.read_text()))
    named = {v for v in NAMES.values() if v}
    assert written == named, written ^ named
    files = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert files == set(NAMES)
