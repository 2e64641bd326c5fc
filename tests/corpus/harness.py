"""The findings corpus: real sessions, what a careful reviewer says of them, and the score.

A scenario builds a workspace on a throwaway HOME, installs real shims with `mcpshim
install`, starts its server under `mcpshim run --mcp` (`--trace`, or `--no-trace`: tracing
is the default) as an MCP client config would, and drives it with the official SDK's
client, one awaited call after another, as an agent does. Then `mcpshim review --format
json` reads the session and its findings are compared with the scenario's expected ones: by
rule id, severity and the tool call they sit under. Expected findings are what is true of
the session, not what mcpshim said when the scenario was written.

Used by tests/corpus/test_corpus.py (each scenario asserts its findings) and by
benchmarks/findings_quality.py (precision and recall over the whole corpus).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpshim.shim.targets import temp_dirs
from tests.corpus.readers import reader_problems
from tests.fixtures import pyservers

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SERVERS = HERE / "servers"  # package.json + package-lock.json of the npm servers (npm ci)
MCPSHIM = [sys.executable, "-m", "mcpshim"]
SEVERITIES = ("info", "low", "medium", "high")
NO_CALL = "-"  # a finding that belongs to no tool call (the session, its server)
ANY_CALL = "*"


class UnavailableError(Exception):
    """What a scenario needs is missing here (node, npm, strace): skip, saying what."""


@contextlib.contextmanager
def skipped_if_unavailable() -> Iterator[None]:
    """A test of a scenario skips, saying why, when what it needs is missing here; under CI
    (which installs what the corpus needs: scripts/system-deps.sh) it fails instead."""
    try:
        yield
    except UnavailableError as exc:
        if os.environ.get("CI"):
            raise
        import pytest

        pytest.skip(str(exc))


@dataclass(frozen=True)
class Expect:
    """One true finding: its rule, severity and the tool call it sits under (NO_CALL: none).

    `names`: what its message or evidence must carry (the program, path or destination it
    is about); required at >= medium, so a finding that says something else is no match.
    `count`: how many such findings are true (a further one is a false positive). `nth`:
    which call of `tool` it is under (1: the tool's first call), when the tool is called
    more than once and which one matters. `optional`: why it is only sometimes seen
    (sampling caught a short-lived process, or did not): it neither adds a true positive
    when present nor costs a miss when absent; the finding it matches is no false one."""

    rule: str
    severity: str
    tool: str = NO_CALL
    optional: bool = False
    names: tuple[str, ...] = ()
    count: int = 1
    nth: int | None = None

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)

    def label(self) -> str:
        nth = f" #{self.nth}" if self.nth is not None else ""
        names = f" naming {', '.join(self.names)}" if self.names else ""
        count = f" x{self.count}" if self.count != 1 else ""
        return f"{self.rule} {self.severity} under {self.tool}{nth}{names}{count}"


@dataclass(frozen=True)
class Got:
    rule: str
    severity: str
    tool: str
    message: str
    count: int = 1
    nth: int | None = None  # which call of its tool it sits under (1: the first)
    texts: tuple[str, ...] = ()  # its message and its evidence's texts

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)

    def label(self) -> str:
        nth = f" #{self.nth}" if self.nth is not None else ""
        return f"{self.rule} {self.severity} under {self.tool}{nth}: {self.message[:160]}"


#: a tool call: its name and arguments, or a function of the earlier answers' texts that
#: gives them (a session id a server made up, as an agent reads it from an answer)
Call = tuple[str, dict[str, Any] | Callable[[list[str]], dict[str, Any]]]


@dataclass
class Workspace:
    """The throwaway world of one scenario run."""

    root: Path
    home: Path
    env: dict[str, str]
    ws: Path  # the project the agent works in
    shim_dir: Path
    log_dir: Path
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    port: int = 0
    heard: list[bytes] = field(default_factory=list)  # what the listener was told


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "benign" | "attack"
    summary: str
    server: Callable[[Workspace], list[str]]  # the server's argv
    calls: Callable[[Workspace], Sequence[Call]]
    expected: tuple[Expect, ...]
    setup: Callable[[Workspace], None] = lambda w: None
    shims: tuple[str, ...] = ("git", "sh", "npm", "node")
    traced: tuple[bool, ...] = (False, True)
    needs: tuple[str, ...] = ()  # programs that must be installed ("node", "npm", "strace")
    #: expected findings that differ under --trace (replace those of the same rule and tool)
    traced_expected: tuple[Expect, ...] | None = None
    server_env: Callable[[Workspace], dict[str, str]] = lambda w: {}
    run_options: tuple[str, ...] = ()
    review_options: tuple[str, ...] = ()
    listener: bool = False  # a local TCP listener standing in for a remote host (CORPUS_PORT)
    linger: float = 0.3  # seconds the agent waits after the last answer before closing
    #: calls sent before the first answers (an agent's parallel tool calls); the requests
    #: go out in the listed order, so a call's place among its tool's (`nth`) is its index
    in_flight: int = 1
    #: what shows the attack really happened (e.g. the listener heard the helper): problems
    proof: Callable[[Workspace], list[str]] = lambda w: []

    def expect(self, trace: bool) -> tuple[Expect, ...]:
        if trace:
            return observed(self.traced_expected or self.expected)
        return sampled(self.expected)


def observed(expected: tuple[Expect, ...]) -> tuple[Expect, ...]:
    """What a traced session says of the network (issue 29): the kernel's connection
    (MCS306), always seen, where the sampler's socket (MCS304) was a matter of luck and a
    helper's arguments (MCS108) a guess; that guess stays, as the info hint it is then."""
    out: dict[tuple[object, ...], Expect] = {}
    for e in expected:
        if e.rule == "MCS304" or (e.rule == "MCS108" and e.rank >= 2):
            key = ("MCS306", e.severity, e.tool, e.nth, e.names)
            out.setdefault(key, replace(e, rule="MCS306", optional=False))
            if e.rule == "MCS108":
                hint = replace(e, severity="info", optional=True)
                out[("MCS108", "info", e.tool, e.nth, e.names)] = hint
            continue
        out.setdefault((e.rule, e.severity, e.tool, e.nth, e.names, e.optional), e)
    return tuple(out.values())


def sampled(expected: tuple[Expect, ...]) -> tuple[Expect, ...]:
    """What an untraced session may also say of the network: where a helper's shim record
    names its destination (MCS108), the sampler may catch its socket too (MCS304), the
    same step seen happening; whether it does is a matter of 100 ms."""
    caught = tuple(
        replace(e, rule="MCS304", optional=True)
        for e in expected
        if e.rule == "MCS108" and e.rank >= 2
    )
    known = {(e.rule, e.tool, e.nth) for e in expected}
    return expected + tuple(e for e in caught if (e.rule, e.tool, e.nth) not in known)


@dataclass
class Outcome:
    scenario: Scenario
    trace: bool
    session: str
    got: list[Got]
    raw: dict[str, Any]
    seconds: float
    call_errors: list[str]
    problems: list[str] = field(default_factory=list)  # the scenario did not happen as meant
    counts: dict[str, int] = field(default_factory=dict)  # execs, by reader (exec_counts)
    port: int = 0  # the listener standing in for a remote host (CORPUS_PORT)
    #: what a read of the session's part of the log said unlike the whole log's (log.scope)
    scope_diff: list[str] = field(default_factory=list)
    #: where review's text or the report (its call sections, its approval cards) filed a
    #: fact unlike review's JSON (tests/corpus/readers.py)
    readers: list[str] = field(default_factory=list)
    #: what another checkout's review said of the same session (run_scenario's `before`),
    #: or why it said nothing
    before: list[Got] | str | None = None

    @property
    def label(self) -> str:
        return f"{self.scenario.name}{' --trace' if self.trace else ''}"


# ---- the world ---------------------------------------------------------------------------


def work_base() -> Path:
    """Scenario worlds live in the checkout (.corpus-work/, gitignored), outside the system
    temp dirs as a user's projects are (a cwd or a script in /tmp is a finding of its own),
    never in the user's HOME; MCPSHIM_CORPUS_DIR moves them. A checkout that is itself in a
    temp dir (a clone in /tmp) gets the policy of `review_policy`."""
    chosen = os.environ.get("MCPSHIM_CORPUS_DIR")
    base = Path(chosen) if chosen else REPO / ".corpus-work"
    base.mkdir(parents=True, exist_ok=True)
    return base


def _checkout_in_temp() -> bool:
    return any(REPO.is_relative_to(t) for t in map(Path, temp_dirs()) if t.is_absolute())


def review_policy(w: Workspace) -> tuple[str, ...]:
    """The corpus's listener stands in for a remote host (CORPUS_PORT): its policy grades a
    loopback destination as a remote one ([network] loopback = "medium"), so an observed
    connection to it is judged as the exfiltration it stands for. A checkout in a temp dir
    runs its servers (and the venv's python) from there, and its scenario worlds' cwds are
    there, which review rightly calls MCS102 and MCS104: the policy a user would write for
    such a CI checkout says the checkout is meant to be there, so the scenario's own
    findings are what is judged. A page server the scenario started (worlds.PageServer)
    is listed, as a user lists their own dev server."""
    policy = w.root / "corpus-policy.toml"
    text = '[network]\nloopback = "medium"\n'
    if dests := w.notes.get("destinations"):  # a page server of the scenario's (worlds.py)
        text += f"destinations = {json.dumps(dests)}\n"
    if _checkout_in_temp():
        text += "".join(
            f'\n[[ignore]]\nrule = "{rule}"\npath = "{REPO}/*"\n'
            'reason = "the test checkout (and its .corpus-work) lives in a temp dir"\n'
            for rule in ("MCS102", "MCS104")
        )
    policy.write_text(text)
    return ("--policy", str(policy))


@contextlib.contextmanager
def workspace(name: str) -> Iterator[Workspace]:
    root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_base()))
    os.chmod(root, 0o755)
    home = root / "home"
    ws = home / "project"
    ws.mkdir(parents=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MCPSHIM_", "npm_", "NPM_", "GIT_")) and k != "PWD"
    }
    env.update(
        {
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / ".local/share"),
            "XDG_STATE_HOME": str(home / ".local/state"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "PATH": os.environ.get("PATH", os.defpath),
            "npm_config_update_notifier": "false",
            "npm_config_audit": "false",
            "npm_config_fund": "false",
            "npm_config_loglevel": "silent",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    w = Workspace(
        root,
        home,
        env,
        ws,
        home / ".local/share/mcpshim/shims",
        home / ".local/state/mcpshim/log",
    )
    try:
        yield w
    finally:
        for fn in reversed(w.cleanup):
            with contextlib.suppress(Exception):
                fn()
        if not os.environ.get("MCPSHIM_CORPUS_KEEP"):  # keep it to look at by hand
            shutil.rmtree(root, ignore_errors=True)


def git_repo(w: Workspace, files: dict[str, str] | None = None) -> None:
    """A small repository with two commits, made before the session (not recorded)."""
    files = files or {"README.md": "# project\n", "notes.txt": "first\n"}
    for name, text in files.items():
        p = w.ws / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    env = {**w.env, "PATH": os.defpath}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "."],
        [*git, "commit", "-qm", "first"],
    ):
        subprocess.run(argv, cwd=w.ws, env=env, check=True)
    (w.ws / "notes.txt").write_text("first\nsecond\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=w.ws, env=env, check=True)
    subprocess.run([*git, "commit", "-qm", "second"], cwd=w.ws, env=env, check=True)
    (w.ws / "notes.txt").write_text("first\nsecond\nthird (uncommitted)\n")


def need(*programs: str) -> None:
    for p in programs:
        if p == "servers":
            servers_installed()
        elif p == "pyservers":
            pyservers_installed()
        elif shutil.which(p) is None:
            raise UnavailableError(f"{p} is not installed")


def pyservers_installed() -> Path:
    """The pinned PyPI servers (tests/fixtures/pyservers.py: one venv, one installer)."""
    try:
        return pyservers.install()
    except pyservers.UnavailableError as exc:
        raise UnavailableError(str(exc)) from None


_npm_checked: list[bool] = []


def servers_installed() -> Path:
    """The pinned npm servers, installed once with `npm ci` from the committed lockfile."""
    bin_dir = SERVERS / "node_modules" / ".bin"
    if _npm_checked:
        return bin_dir
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise UnavailableError("node/npm not installed")
    want = json.loads((SERVERS / "package.json").read_text())["dependencies"]
    ok = True
    for pkg, version in want.items():
        meta = SERVERS / "node_modules" / pkg / "package.json"
        ok = ok and meta.is_file() and json.loads(meta.read_text()).get("version") == version
    if not ok:
        proc = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=SERVERS,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode != 0:
            offline = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET")
            if any(k in proc.stderr for k in offline) and not os.environ.get("CI"):
                raise UnavailableError(f"npm registry unreachable: {proc.stderr.strip()[-300:]}")
            raise RuntimeError(f"npm ci failed in {SERVERS}:\n{proc.stderr}")
    _npm_checked.append(True)
    return bin_dir


# ---- running -----------------------------------------------------------------------------


def mcpshim(
    w: Workspace, *args: str, check: bool = True, src: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """mcpshim in the workspace; `src`: another checkout's root whose code runs instead."""
    env = w.env if src is None else {**w.env, "PYTHONPATH": str(src / "src")}
    proc = subprocess.run(
        [*MCPSHIM, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if check and proc.returncode not in (0, 1):
        raise RuntimeError(f"mcpshim {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def _events(w: Workspace, kind: str) -> list[dict[str, Any]]:
    from mcpshim.log import execlog
    from mcpshim.paths import Locations

    loc = Locations(w.shim_dir, w.log_dir)
    if not loc.log_dir.is_dir():
        return []
    return [
        dict(r.data)
        for r in execlog.iter_records(loc, [])
        if isinstance(r, execlog.EventRecord) and r.kind == kind
    ]


class Listener:
    """127.0.0.1:port, accepting connections and reading what they say until they close."""

    def __init__(self, w: Workspace) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.w = w
        w.port = self.sock.getsockname()[1]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.5)
            while not self.done.is_set():
                try:
                    data = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                self.w.heard.append(data)
                if data.startswith(b"\x16"):
                    return  # a TLS hello: no server here, close as a refusing host would

    def close(self) -> None:
        self.done.set()
        self.sock.close()


async def _drive(
    params: StdioServerParameters,
    calls: Sequence[Call],
    errlog: Path,
    linger: float,
    in_flight: int = 1,
) -> list[str]:
    errors: list[str] = []
    with errlog.open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            await s.list_tools()
            if in_flight > 1:
                await _parallel(s, calls, errors, in_flight)
            else:
                await _in_turn(s, calls, errors)
            await anyio.sleep(linger)
    return errors


def _said(name: str, res: Any, errors: list[str]) -> str:
    """A call's answer as text; an error answer noted in `errors`."""
    text = " ".join(getattr(c, "text", "") for c in res.content)
    if res.is_error:
        errors.append(f"{name}: {text[:300]}")
    return text


async def _in_turn(s: ClientSession, calls: Sequence[Call], errors: list[str]) -> None:
    """One call after another, as an agent makes them (a call may read earlier answers)."""
    answers: list[str] = []
    for name, args in calls:
        res = await s.call_tool(name, args(answers) if callable(args) else args)
        answers.append(_said(name, res, errors))
        await anyio.sleep(0.05)  # an agent reads the answer before the next call


async def _parallel(
    s: ClientSession, calls: Sequence[Call], errors: list[str], in_flight: int
) -> None:
    """The calls with up to `in_flight` awaiting their answers. The SDK numbers a request as
    its call starts and the limiter admits waiters first come, first served, so the requests
    go out in the listed order."""
    limit = anyio.CapacityLimiter(in_flight)

    async def one(name: str, args: dict[str, Any]) -> None:
        async with limit:
            _said(name, await s.call_tool(name, args), errors)

    async with anyio.create_task_group() as tg:
        for name, args in calls:
            assert not callable(args), "parallel calls cannot read earlier answers"
            tg.start_soon(one, name, args)
            await anyio.sleep(0)  # this call takes its place in the limiter's queue


def prepare(w: Workspace, sc: Scenario) -> None:
    """The scenario's world before its first session: shims, listener, its own setup."""
    mcpshim(w, "install", *sc.shims)
    if sc.listener:
        w.cleanup.append(Listener(w).close)
    sc.setup(w)


def session_in(
    w: Workspace, sc: Scenario, trace: bool | None, opts: Sequence[str] = ()
) -> tuple[str, list[str], float]:
    """One session of the scenario's server in a prepared world, driven by its calls:
    (its id, the calls' errors, the seconds the client took). `trace` None: the server
    run directly, with no mcpshim (the cost's anchor; then no id)."""
    argv = sc.server(w)
    env = {**w.env, **sc.server_env(w), "CORPUS_PORT": str(w.port)}
    if trace is None:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(w.ws))
    else:
        mode = "--trace" if trace else "--no-trace"  # run traces by default where it can
        run = ["run", "--mcp", mode, *sc.run_options, *opts, "--", *argv]
        params = StdioServerParameters(command=MCPSHIM[0], args=[*MCPSHIM[1:], *run], env=env,
                                       cwd=str(w.ws))  # fmt: skip
    before = {str(e["session"]) for e in _events(w, "session-start")}
    t0 = time.monotonic()
    errors = anyio.run(_drive, params, sc.calls(w), w.root / "server.stderr", sc.linger,
                       sc.in_flight)  # fmt: skip
    took = time.monotonic() - t0
    if trace is None:
        return "", errors, took
    deadline = time.monotonic() + 60
    while True:
        ended = {str(e["session"]) for e in _events(w, "session-end")} - before
        if ended:
            return ended.pop(), errors, took
        if time.monotonic() > deadline:
            raise RuntimeError(f"{sc.name}: no session-end record")
        time.sleep(0.05)


def _review_by(w: Workspace, sc: Scenario, session: str, src: Path) -> list[Got] | str:
    """Another checkout's review of the session (its findings), or why it gave none."""
    proc = mcpshim(w, "review", "--session", session, "--format", "json", *review_policy(w),
                   *sc.review_options, check=False, src=src)  # fmt: skip
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
    return findings_of(json.loads(proc.stdout))


def run_scenario(sc: Scenario, trace: bool, before: Path | None = None) -> Outcome:
    """One real session of `sc`, reviewed; `before`: another checkout's root whose review
    also reads the same session (the per-server table before and after a change)."""
    need(*sc.needs)
    if trace:
        need("strace")
    t0 = time.monotonic()
    with workspace(sc.name) as w:
        prepare(w, sc)
        session, errors, _took = session_in(w, sc, trace)
        proc = mcpshim(w, "review", "--session", session, "--format", "json", *review_policy(w),
                       *sc.review_options)  # fmt: skip
        raw = json.loads(proc.stdout)
        text = mcpshim(w, "review", "--session", session, *review_policy(w), *sc.review_options)
        md = mcpshim(w, "report", "--session", session, "--format", "md", "-o", "-")
        said = reader_problems(raw, text.stdout, md.stdout)
        old = _review_by(w, sc, session, before) if before is not None else None
        got = findings_of(raw)
        problems = sc.proof(w)
        counts = exec_counts(w, session, raw)
        diff = scope_diff(w, session)
        _kill_session(session)
    out = Outcome(sc, trace, session, got, raw, time.monotonic() - t0, errors, problems)
    out.counts, out.scope_diff, out.readers, out.before = counts, diff, said, old
    out.port = w.port if sc.listener else 0
    return out


def exec_counts(w: Workspace, session: str, review: dict[str, Any]) -> dict[str, int]:
    """The session's execs as each reader counts them: `sessions`, `tree`, review's
    coverage line, `log --format ecs` (a process document each) and `export otlp` (an exec
    span each, made in-process: the exporter needs an endpoint; a process that never exec'd
    is a span too, said as no exec)."""
    from mcpshim.family.attribution import anchors_for
    from mcpshim.log import execlog
    from mcpshim.otel.collect import collect_traces
    from mcpshim.paths import Locations
    from mcpshim.review.policy import default_policy

    listed = json.loads(mcpshim(w, "sessions", "--format", "json").stdout)["sessions"]
    tree = json.loads(mcpshim(w, "tree", "--session", session, "--format", "json").stdout)
    ecs = mcpshim(w, "log", "--session", session, "--format", "ecs").stdout.splitlines()
    [cov] = [c for c in review.get("coverage", []) if c["session"] == session]
    loc = Locations(w.shim_dir, w.log_dir)
    [trace] = collect_traces(execlog.iter_records(loc, []), policy=default_policy(),
                             anchor=anchors_for(loc), host="corpus", session=session)  # fmt: skip
    return {
        "sessions": next(s["execs"] for s in listed if s["id"] == session),
        "tree": tree["summary"]["images"],
        "review": cov["execs"],
        "ecs": sum(1 for line in ecs if json.loads(line)["event"]["dataset"] == "mcpshim.exec"),
        "otlp": sum(1 for sp in trace.spans if sp.attributes.get("mcpshim.process.exec")),
    }


def scope_diff(w: Workspace, session: str) -> list[str]:
    """The commands whose answer for `session` differs between reading its part of the log
    (log.scope) and reading the whole log (run in this process, in the workspace's HOME)."""
    from unittest import mock

    from mcpshim.paths import Locations
    from tests.fixtures.scopecheck import both

    home = {k: v for k, v in w.env.items() if k == "HOME" or k.startswith("XDG_")}
    with mock.patch.dict(os.environ, home):
        scoped, whole = both(Locations(w.shim_dir, w.log_dir), session, w.root / "scope")
    return [f"{a[0]}: {str(a)[:400]} != {str(b)[:400]}"  # type: ignore[index]
            for a, b in zip(scoped, whole, strict=True) if a != b]  # fmt: skip


def _request_order(call: dict[str, Any]) -> tuple[str, int, str]:
    """Calls in the order their requests came: by time, which parallel calls share to the
    millisecond, then by id (the SDK numbers requests as it sends them)."""
    cid = call.get("id")
    return str(call.get("time")), cid if isinstance(cid, int) else -1, str(cid)


def findings_of(review: dict[str, Any]) -> list[Got]:
    """Review's JSON findings as the scorer reads them: each with the call it sits under,
    counted among the calls of its tool (`nth`), and every text it says."""
    order: dict[str, int] = {}  # a call's request id -> its place among its tool's calls
    seen: dict[str, int] = {}
    for c in sorted(review.get("calls", []), key=_request_order):
        name = str(c.get("name"))
        seen[name] = seen.get(name, 0) + 1
        order[str(c.get("id"))] = seen[name]
    out = []
    for f in review["findings"]:
        call = f.get("call")
        tool, nth = NO_CALL, None
        if isinstance(call, dict):
            tool = str(call.get("name") or NO_CALL)
            nth = order.get(str(call.get("id")))
        texts = (str(f["message"]), *(str(e.get("text", "")) for e in f.get("evidence", ())))
        out.append(Got(f["rule"], f["severity"], tool, f["message"], int(f.get("count", 1)),
                       nth, texts))  # fmt: skip
    return out


def _kill_session(session: str) -> None:
    """Whatever a scenario left running (a survivor it meant to leave) goes now."""
    needle = f"MCPSHIM_SESSION={session}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                os.kill(int(name), signal.SIGKILL)


# ---- scoring -----------------------------------------------------------------------------


def matches(e: Expect, g: Got) -> bool:
    """The finding is the one expected: its rule, severity and call (the tool, and which of
    its calls where `nth` says), and it names everything the expectation names."""
    if (e.rule, e.severity) != (g.rule, g.severity):
        return False
    if e.tool != ANY_CALL and e.tool != g.tool:
        return False
    if e.nth is not None and e.nth != g.nth:
        return False
    return all(any(name in t for t in g.texts) for name in e.names)


def label_problems(expected: Sequence[Expect], threshold: int = 2) -> list[str]:
    """Expectations a strict scorer cannot judge: at >= threshold, each names what its
    finding is about and the call it sits under (or none), never any call."""
    bad = []
    for e in expected:
        if e.rank < threshold:
            continue
        if e.tool == ANY_CALL:
            bad.append(f"{e.label()}: at >= {SEVERITIES[threshold]} a finding's call is named")
        if not e.names:
            bad.append(f"{e.label()}: at >= {SEVERITIES[threshold]} it names what it is about")
        if e.count < 1:
            bad.append(f"{e.label()}: a count of at least one")
    return bad


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    false_low: list[Got] = field(default_factory=list)  # below threshold, not expected at all
    missed: list[Expect] = field(default_factory=list)
    extra: list[Got] = field(default_factory=list)
    placed: list[tuple[Expect, bool]] = field(default_factory=list)  # attack: under its call?
    #: a benign session's findings at >= threshold, true or not (a CI gate fails on them)
    benign_alarms: int = 0
    labels: list[str] = field(default_factory=list)  # label_problems

    @property
    def wrong(self) -> bool:
        return bool(self.fp or self.fn or self.false_low or self.labels)


def network_problems(out: Outcome) -> list[str]:
    """What a traced session's review says of the network that the kernel did not show:
    a call that "reached the network" with no observed connection, send or listener under
    it, a name-based guess (MCS108, MCS109) or a sampled socket (MCS304) at >= medium; and
    an attack whose helper reached the listener that no observed connection names."""
    if not out.trace:
        return []
    bad = []
    for c in out.raw.get("calls", []):
        seen = [f for f in c.get("net", []) if f["kind"] in ("reached", "listened")]
        if c.get("network_evidence") != "traced":
            bad.append(f"{c['name']} (id {c['id']}): network evidence {c.get('network_evidence')}")
        if bool(c.get("network")) != bool(seen):
            bad.append(f"{c['name']} (id {c['id']}): network {c.get('network')} from {seen}")
    for g in out.got:
        if g.rule in ("MCS108", "MCS109", "MCS304") and SEVERITIES.index(g.severity) >= 2:
            bad.append(f"{g.rule} {g.severity} under {g.tool}: a guess said as a contact")
    if out.port:
        dest = f"127.0.0.1:{out.port}"
        reached = [f for c in out.raw.get("calls", []) for f in c.get("net", [])
                   if f["destination"] == dest and f["reached"]]  # fmt: skip
        # or between calls (a helper that phoned home once its call had answered)
        reached += [g for g in out.got if g.rule == "MCS306" and any(dest in t for t in g.texts)]
        if not reached and not out.problems:
            bad.append(f"the listener {dest} heard the attack; no observed connection names it")
    return bad


#: a finding under a call, and the question of the call's block that must then say yes
_SAYS = {"MCS306": "network", "MCS304": "network", "MCS307": "tried", "MCS107": "editable",
         "MCS102": "new", "MCS103": "new", "MCS120": "new"}  # fmt: skip


def block_problems(out: Outcome) -> list[str]:
    """Calls whose block contradicts the findings under it (issue 37: a call's summary
    lines come from the same facts as its findings): a connection filed under a call
    whose block says it reached no network, a project script under a call that ran no
    editable file, a detached helper under a call that outlived nothing."""
    bad = []
    blocks = {str(c.get("id")): c for c in out.raw.get("calls", [])}
    for f in out.raw.get("findings", []):
        call = f.get("call")
        if not isinstance(call, dict):
            continue
        block = blocks.get(str(call.get("id")))
        if block is None:
            bad.append(f"{f['rule']} under {call.get('name')}: no block for its call")
            continue
        key = _SAYS.get(f["rule"])
        if f["rule"] == "MCS501" and f["severity"] != "info":
            key = "outlived"
        if key is not None and not block.get(key):
            bad.append(f"{f['rule']} under {call['name']} (id {call.get('id')}): its block "
                       f"answers {key!r} with nothing")  # fmt: skip
    return bad


def score(out: Outcome, threshold: int = 2) -> Score:
    """TP/FP/FN at >= threshold (medium), strictly: each expected finding is matched by
    one finding (its rule, severity, call and names; `count` of them); every finding at >=
    threshold that no expectation matched is a false positive, a second one of an expected
    kind included; an optional expectation takes the findings it matches and counts for
    nothing. Below threshold, a finding nobody expected is a false statement."""
    s = Score()
    exp = out.scenario.expect(out.trace)
    s.labels = label_problems(exp, threshold)
    used: set[int] = set()
    for e in sorted(exp, key=lambda e: e.optional):  # the required ones choose first
        hits = [i for i, g in enumerate(out.got) if i not in used and matches(e, g)][: e.count]
        used.update(hits)
        if e.optional:
            continue
        if e.rank >= threshold:
            s.tp += len(hits)
            if len(hits) < e.count:
                s.fn += e.count - len(hits)
                s.missed.append(e)
            if out.scenario.kind == "attack":
                s.placed.append((e, len(hits) == e.count))
        elif len(hits) < e.count:
            s.missed.append(e)  # below threshold: a statement that should be there
    for i, g in enumerate(out.got):
        if g.rank >= threshold and out.scenario.kind == "benign":
            s.benign_alarms += 1
        if i in used:
            continue
        if g.rank >= threshold:
            s.fp += 1
            s.extra.append(g)
        else:
            s.false_low.append(g)
    return s
