"""One process, one account (issue 27): each exec once, whichever sources saw it, and
every reader counts the same execs. Real sessions under `mcpshim run`, traced and not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mcpshim.family import tree
from mcpshim.log import execlog
from mcpshim.review import engine as review
from mcpshim.review.policy import default_policy
from tests.fixtures.contract import fail_on_of, findings_code
from tests.fixtures.home import Home, install
from tests.fixtures.runhelp import MCPSHIM, needs_trace, only_session, run

# python's shell=True starts /bin/sh by absolute path (no shim sees it); the sleep keeps
# it alive across several of the sampler's ticks, so sampler, tracer and git's parent
# evidence all see the one shell
SHELL_LINE = "sleep 0.6; git --version >/dev/null"
ROOT = Path(__file__).resolve().parents[2]
PY = [sys.executable, "-c", f"import subprocess; subprocess.run({SHELL_LINE!r}, shell=True)"]


def _cli(home: Home, *args: str, code: int = 0) -> str:
    """The command's output; its status is `code`, or for review's JSON what its findings
    give (tests/fixtures/contract.py)."""
    proc = subprocess.run([*MCPSHIM, *args, "--dir", str(home.loc.shim_dir)], env=home.env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    if args[0] == "review" and "json" in args:
        code = findings_code(json.loads(proc.stdout), fail_on_of(args))
    assert proc.returncode == code, proc.stderr
    return proc.stdout


def _counts(home: Home, sid: str) -> dict[str, int]:
    listed = json.loads(_cli(home, "sessions", "--format", "json"))["sessions"]
    tree_doc = json.loads(_cli(home, "tree", "--session", sid, "--format", "json"))
    rev = json.loads(_cli(home, "review", "--session", sid, "--format", "json"))
    ecs = [json.loads(x) for x in _cli(home, "log", "--session", sid, "--format", "ecs")
           .splitlines()]  # fmt: skip
    return {
        "sessions": next(s["execs"] for s in listed if s["id"] == sid),
        "tree": tree_doc["summary"]["images"],
        "review": next(c["execs"] for c in rev["coverage"] if c["session"] == sid),
        "ecs": sum(d["event"]["dataset"] == "mcpshim.exec" for d in ecs),
    }


def _shell_findings(home: Home, sid: str) -> list[tuple[str, str]]:
    result = review.review(home.records(), policy=default_policy(), session=sid,
                           shim_dir=str(home.loc.shim_dir))  # fmt: skip
    return [(f.rule.id, f.message) for f in result.findings if " -c " in f.message]


@pytest.mark.parametrize("mode", ["--no-trace", pytest.param("--trace", marks=needs_trace)])
def test_one_shell_seen_by_every_source_is_one_exec(home: Home, mode: str) -> None:
    install(home, ["git", "sh"])
    assert run(home, PY, mode).returncode == 0
    sid = only_session(home)
    recs = home.records()
    shells = [r for r in recs if isinstance(r, execlog.EventRecord) and r.kind == "observed"
              and b"-c" in json.dumps(r.data.get("cmdline")).encode()]  # fmt: skip
    assert shells, "the sampler saw the shell"  # else the test proves nothing
    found = _shell_findings(home, sid)
    rules = [rule for rule, _m in found]
    assert found and len(rules) == len(set(rules)), found  # each rule once for the one shell
    assert not any("dash" in m for _r, m in found), found  # named as invoked: sh
    forest = tree.build_forest(tree.images(recs, sid))
    procs = [n for r in forest.roots for n in r.walk() if n.known]
    sh = [n for n in procs if any(i.command in ("sh", "dash") for i in n.images if i.entry)]
    assert len(sh) == 1 and sum(i.entry for i in sh[0].images) == 1, sh
    counts = _counts(home, sid)
    assert len(set(counts.values())) == 1, counts


@needs_trace
def test_traced_only_execs_are_ecs_documents_and_counted(home: Home) -> None:
    install(home, ["git"])
    assert run(home, ["sh", "-c", "/usr/bin/id -u >/dev/null; /usr/bin/env true"]).returncode == 0
    sid = only_session(home)
    counts = _counts(home, sid)
    # sh, id, env and the true env runs: four execs, no shim took part
    assert counts == dict.fromkeys(counts, 4), counts
    docs = [json.loads(x) for x in _cli(home, "log", "--session", sid, "--format", "ecs")
            .splitlines()]  # fmt: skip
    assert [d["process"]["name"] for d in docs] == ["sh", "id", "env", "true"]
    # its composed sh -c line is low (docs/verdicts.md): nothing at the default gate
    text = _cli(home, "review", "--session", sid, code=0)
    in_session = sum(1 for r in home.records() if execlog.session_of(r) == sid)
    assert f"records: {in_session}\n" in text


@needs_trace
def test_a_fork_that_never_execs_is_an_ecs_process_document(home: Home) -> None:
    """A subshell runs its parent's program: no exec, so no exec document, but the family
    has one more process, and ECS says so in a dataset of its own."""
    install(home, ["git"])
    assert run(home, ["sh", "-c", "(/bin/sleep 0.3; :); :"]).returncode == 0
    sid = only_session(home)
    docs = [json.loads(x) for x in _cli(home, "log", "--session", sid, "--format", "ecs")
            .splitlines()]  # fmt: skip
    execs = [d for d in docs if d["event"]["dataset"] == "mcpshim.exec"]
    forks = [d for d in docs if d["event"]["dataset"] == "mcpshim.process"]
    assert [d["process"]["name"] for d in execs] == ["sh", "sleep"], docs
    assert len(forks) == 1, docs
    [sub] = forks
    [sh] = [d for d in execs if d["process"]["name"] == "sh"]
    [sleep] = [d for d in execs if d["process"]["name"] == "sleep"]
    assert sub["process"]["parent"]["pid"] == sh["process"]["pid"]
    assert sleep["process"]["parent"]["pid"] == sub["process"]["pid"]
    assert sub["event"]["type"] == ["info"] and "never exec'd" in sub["message"]
    assert sub["process"]["entity_id"] not in {d["process"]["entity_id"] for d in execs}
    schema = json.loads((ROOT / "docs/schemas/ecs-1.schema.json").read_text())
    jsonschema.validate(sub, schema)
    assert _counts(home, sid)["ecs"] == 2


@needs_trace
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.parametrize("mode", ["--trace", "--no-trace"])
def test_a_process_title_is_not_an_exec(home: Home, mode: str) -> None:
    install(home, ["git"])
    js = "process.title='node (worker 1)'; setTimeout(()=>{},600)"
    assert run(home, ["node", "-e", js], mode).returncode == 0
    sid = only_session(home)
    text = _cli(home, "tree", "--session", sid)
    assert "] 'node (worker 1)'" not in text, text  # no image headed by the title
    assert _counts(home, sid)["tree"] == 1, text


@needs_trace
def test_a_path_search_is_headlined_by_the_exec_it_found(home: Home, tmp_path: object) -> None:
    install(home, ["git"])
    # env looks ls up with execvp: an execve per PATH entry until one runs
    line = "PATH=/nowhere/a:/nowhere/b:/usr/bin:/bin; export PATH; env ls / >/dev/null"
    assert run(home, ["sh", "-c", line]).returncode == 0
    sid = only_session(home)
    text = _cli(home, "tree", "--session", sid)
    ls_lines = [ln for ln in text.splitlines() if "ls /" in ln or "/nowhere/" in ln]
    assert ls_lines and "[trace]" in ls_lines[0] and "ENOENT" not in ls_lines[0], text
    assert "tried /nowhere/a/ls (ENOENT), /nowhere/b/ls (ENOENT)" in text, text
