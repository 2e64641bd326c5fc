"""Launch-line rules (MCS22x) for servers in an MCP client config.

The launch line is the first exec of the family: a bare `command` is a PATH lookup made
with the client's PATH; `npx -y pkg` runs whatever the registry serves today; a literal
token in `env` sits in a file other tools read. Values of credentials are never printed:
findings name the key and the shape that matched.

A server wrap-config put under `mcpshim run ... -- CMD` is linted as CMD (what `run` then
starts with the same PATH, cwd and env), each finding saying it is inside the wrapper, and
the wrapper's own program is held to the same unsafe-directory rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from mcpshim.base.display import quote_argv
from mcpshim.log import redact
from mcpshim.pathcheck.clientconfig import McpConfig, ServerEntry, effective_path, expand_vars
from mcpshim.pathcheck.facts import probe, under
from mcpshim.pathcheck.lint import LintSettings, Scope, lint_path, shadows
from mcpshim.pathcheck.wrap import is_wrapped, unwrapped
from mcpshim.review.findings import Evidence, Finding, Rule, Severity, define_rule

__all__ = [
    "LAUNCH_RULES",
    "ConfigLint",
    "LaunchContext",
    "launch_line",
    "lint_config",
    "lint_launch",
]

BARE = define_rule(
    "MCS220",
    "launch-bare-command",
    Severity.MEDIUM,
    "The server's command is a bare name (or relative path), so the client's PATH or "
    "working directory decides which program starts.",
    "Write the absolute path of the program in `command`.",
    ("CWE-426", "CWE-427"),
    answers=(),
)
UNSAFE_DIR = define_rule(
    "MCS221",
    "launch-command-unsafe-dir",
    Severity.HIGH,
    "The server's program lives in a temporary directory or one that others can write.",
    "Install the server somewhere owned by you or root and point `command` there.",
    ("CWE-427",),
    answers=(),
)
FETCHES = define_rule(
    "MCS222",
    "launch-fetches-code",
    Severity.MEDIUM,
    "The launcher downloads and runs code at every start (npx, uvx, pipx run, bunx, "
    "docker run with a mutable tag), so what runs can change without any local edit.",
    "Install a pinned version once and run it by absolute path, or pin the image by digest.",
    ("CWE-494",),
    answers=(),
)
SHELL = define_rule(
    "MCS223",
    "launch-shell-command",
    Severity.MEDIUM,
    "The server is started through `sh -c` with a composed command line, which hides the "
    "real program and lets quoting and variables change it.",
    "Put the program in `command` and its arguments in `args`; drop the shell.",
    ("CWE-78",),
    answers=(),
)
CREDENTIAL = define_rule(
    "MCS224",
    "launch-literal-credential",
    Severity.HIGH,
    "A credential is written literally in the config (env, args, headers or url).",
    "Reference it from the environment or a secret store (e.g. ${env:NAME} or an input "
    "prompt) instead of writing the value in the file.",
    ("CWE-798",),
    answers=(),
)

_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish", "ash", "busybox"}
_DOCKER_FLAGS = set("itdPq")
_DOCKER_BOOL = {
    "--rm",
    "--init",
    "--interactive",
    "--tty",
    "--detach",
    "--privileged",
    "--read-only",
    "--publish-all",
    "--no-healthcheck",
    "--quiet",
    "--sig-proxy",
}


@dataclass(frozen=True)
class LaunchContext:
    config: McpConfig
    path: str  # the server's effective PATH
    temp_dirs: tuple[str, ...]
    owners: frozenset[int]
    cwd: str  # where a relative command would be looked up


def launch_line(server: ServerEntry) -> str:
    """The launch line for display: credentials redacted, quoted, terminal-safe."""
    argv = [os.fsencode(a) for a in (server.command or "", *server.args)]
    return quote_argv(redact.redact_argv(argv).argv)


def _finding(rule: Rule, ctx: LaunchContext, s: ServerEntry, msg: str, path: str = "") -> Finding:
    where = f"{ctx.config.path}:{s.line}"
    data = {"command": s.command or "", "path": path or s.command or "", "server": s.name}
    shown = launch_line(s) if s.command else redact.redact_text((s.url or "").encode()).decode()
    ev = (Evidence(where, shown, data),)
    key = f"{s.name}\0{msg}"
    return Finding(rule, msg, ev, s.name, str(ctx.config.path), s.line, key=key)


def resolve(command: str, path: str, cwd: str) -> str | None:
    """What a bare name means on this PATH (execvp's search), or None."""
    for entry in path.split(":"):
        cand = os.path.join(os.path.join(cwd, entry) if entry else cwd, command)
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def check_bare(s: ServerEntry, ctx: LaunchContext) -> Iterable[Finding]:
    cmd = s.command or ""
    if "/" not in cmd:
        got = resolve(cmd, ctx.path, ctx.cwd)
        found = f"resolves to {got}" if got else "is not found"
        yield _finding(BARE, ctx, s, f"command {cmd!r} is a bare name: on its PATH it {found}")
    elif not cmd.startswith("/"):
        yield _finding(BARE, ctx, s, f"command {cmd!r} is relative to the client's directory")


def check_unsafe_dir(s: ServerEntry, ctx: LaunchContext) -> Iterable[Finding]:
    cmd = s.command or ""
    prog = (
        cmd if cmd.startswith("/") else resolve(cmd, ctx.path, ctx.cwd) if "/" not in cmd else None
    )
    if prog is None:
        return
    facts = probe([os.path.dirname(prog)], (), ctx.owners, ctx.cwd)[0]
    real = os.path.realpath(prog)
    for t in ctx.temp_dirs:
        if under(prog, t) or under(real, t):
            yield _finding(UNSAFE_DIR, ctx, s, f"{prog} is in the temporary directory {t}", prog)
            return
    if facts.weak:
        why = "; ".join(facts.weak)
        yield _finding(
            UNSAFE_DIR, ctx, s, f"{prog} is in a directory others can change: {why}", prog
        )


def _docker_image(args: Sequence[str]) -> str | None:
    it = iter(args)
    for a in it:
        if a == "run":
            break
    else:
        return None
    for a in it:
        if a == "--":
            return next(it, None)
        if a.startswith("--"):
            if "=" not in a and a not in _DOCKER_BOOL:
                next(it, None)
            continue
        if a.startswith("-") and len(a) > 1:
            if not set(a[1:]) <= _DOCKER_FLAGS:
                next(it, None)
            continue
        return a
    return None


def _image_problem(image: str) -> str | None:
    if "@sha256:" in image:
        return None
    name = image.rsplit("/", 1)[-1]
    if ":" not in name:
        return f"image {image} has no tag (it means :latest)"
    tag = name.split(":", 1)[1]
    if tag == "latest":
        return f"image {image} uses the :latest tag"
    return f"image {image} is pinned by tag :{tag}, which can be moved (pin @sha256:...)"


def _first_operand(args: Sequence[str]) -> str:
    return next((a for a in args if not a.startswith("-")), "")


def fetcher(argv: Sequence[str]) -> str | None:
    """Why this launch line downloads what it runs at every start, or None."""
    if not argv:
        return None
    prog, rest = os.path.basename(argv[0]), list(argv[1:])
    while prog == "env" and rest:  # env [-opt]... [NAME=value]... program [arg]...
        while rest and (rest[0].startswith("-") or "=" in rest[0]):
            rest = rest[1:]
        if not rest:
            return None
        prog, rest = os.path.basename(rest[0]), rest[1:]
    sub = rest[0] if rest else ""
    pkg = _first_operand(rest)
    if prog == "npx":
        yes = " without a prompt (-y)" if {"-y", "--yes"} & set(rest) else ""
        return f"npx fetches and runs {pkg or 'a package'} from the npm registry{yes}"
    if prog in ("uvx", "bunx"):
        return f"{prog} fetches and runs {pkg or 'a package'} at start"
    if prog == "pipx" and sub == "run":
        return f"pipx run fetches and runs {_first_operand(rest[1:]) or 'a package'} at start"
    if prog == "uv" and rest[:2] == ["tool", "run"]:
        return f"uv tool run fetches and runs {_first_operand(rest[2:]) or 'a package'}"
    if prog in ("pnpm", "yarn", "bun") and sub in ("dlx", "x"):
        return f"{prog} {sub} fetches and runs {_first_operand(rest[1:]) or 'a package'}"
    if prog in ("docker", "podman", "nerdctl") and "run" in rest:
        image = _docker_image(rest)
        return _image_problem(image) if image else None
    return None


def check_fetches(s: ServerEntry, ctx: LaunchContext) -> Iterable[Finding]:
    why = fetcher([s.command or "", *s.args])
    if why:
        yield _finding(FETCHES, ctx, s, why)


def check_shell(s: ServerEntry, ctx: LaunchContext) -> Iterable[Finding]:
    prog = os.path.basename(s.command or "")
    if prog in _SHELLS or prog in ("cmd", "cmd.exe"):
        flag = next(
            (
                a
                for a in s.args
                if (a.startswith("-") and not a.startswith("--") and "c" in a[1:])
                or a.lower() == "/c"
            ),
            None,
        )
        if flag is not None:
            yield _finding(SHELL, ctx, s, f"started through {prog} {flag} with a composed line")


_ANY_REF = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")
_SCHEMES = {"bearer", "basic", "token"}


def _literal(value: str) -> bool:
    """Whether a value holds more than variable references (and an auth scheme word)."""
    rest = _ANY_REF.sub(" ", value).split()
    return any(w.lower() not in _SCHEMES for w in rest)


def check_credentials(s: ServerEntry, ctx: LaunchContext) -> Iterable[Finding]:
    for where, values in (("env", s.env), ("headers", s.headers)):
        for key, value in values.items():
            rules: list[str] = []
            redact.redact_text(_ANY_REF.sub(" ", value).encode(), rules)
            named = redact.is_credential_name(key) or key.lower() in ("authorization", "cookie")
            if (named and _literal(value)) or rules:
                shape = f" (looks like {', '.join(dict.fromkeys(rules))})" if rules else ""
                msg = f"{where}.{key} holds a literal credential{shape}"
                yield _finding(CREDENTIAL, ctx, s, msg)
    command = os.path.basename(s.command or "")
    hit = redact.redact_argv([os.fsencode(a) for a in s.args], command=command)
    for i, (before, after) in enumerate(zip(s.args, hit.argv, strict=True)):
        if os.fsencode(before) != after:
            shapes = ", ".join(dict.fromkeys(m.decode() for m in redact.MARKER_RE.findall(after)))
            yield _finding(CREDENTIAL, ctx, s, f"args[{i}] holds a literal credential ({shapes})")
    if s.url:
        rules = []
        redact.redact_text(s.url.encode(), rules)
        if rules:
            yield _finding(CREDENTIAL, ctx, s, f"url holds a literal credential ({rules[0]})")


LAUNCH_RULES = (check_bare, check_unsafe_dir, check_fetches, check_shell, check_credentials)


def inside_wrapper(server: ServerEntry) -> ServerEntry | None:
    """The server as `mcpshim run ... -- CMD ARGS` starts it (CMD ARGS), or None when the
    entry is not wrapped."""
    if not is_wrapped(server.command, server.args):
        return None
    command, args = unwrapped(server.args)
    return replace(server, command=command, args=tuple(args))


_WRAPPED = " (inside its mcpshim run wrapper)"


def lint_launch(server: ServerEntry, ctx: LaunchContext) -> list[Finding]:
    if not server.stdio:
        return list(check_credentials(server, ctx))
    inner = inside_wrapper(server)
    if inner is None:
        return [f for rule in LAUNCH_RULES for f in rule(server, ctx)]
    found = [replace(f, message=f.message + _WRAPPED) for r in LAUNCH_RULES for f in r(inner, ctx)]
    return found + list(check_unsafe_dir(server, ctx))  # the wrapper's own program


@dataclass(frozen=True)
class ConfigLint:
    findings: list[Finding]
    notes: list[str]


def lint_config(
    config: McpConfig,
    names: Sequence[str],
    settings: LintSettings,
    environ: Mapping[str, str],
) -> ConfigLint:
    """Each chosen server's launch line, then each distinct PATH the servers start with."""
    chosen = [config.server(n) for n in dict.fromkeys(names)] if names else list(config.servers)
    ws = config.workspace()
    cwd = str(ws) if ws else os.path.dirname(os.path.abspath(config.path))
    findings: list[Finding] = []
    notes: list[str] = [f"relative entries and commands are looked up from {cwd} (assumed)"]
    by_path: dict[str, list[ServerEntry]] = {}
    for entry in chosen:
        s = entry
        if not s.stdio:
            url = redact.redact_text((s.url or "no url").encode()).decode()
            notes.append(f"{s.name}: remote server ({url}): no launch line or PATH to check")
            ctx = LaunchContext(config, "", settings.temp_dirs, settings.owners, cwd)
            findings += lint_launch(s, ctx)
            continue
        command, used = expand_vars(s.command or "", config, environ)
        if used:
            notes.append(f"{s.name}: command expanded ({', '.join(used)}) to {command}")
            s = replace(s, command=command)
        inner = inside_wrapper(s)
        if inner is not None:
            shown = launch_line(inner)
            notes.append(f"{s.name}: wrapped (mcpshim run); linted as what it starts: {shown}")
        eff = effective_path(config, s, environ)
        notes.append(f"{s.name}: PATH from {eff.source}: {eff.value}")
        ctx = LaunchContext(config, eff.value, settings.temp_dirs, settings.owners, cwd)
        findings += lint_launch(s, ctx)
        by_path.setdefault(eff.value, []).append(s)
    for value, group in by_path.items():
        label = "PATH of " + ", ".join(s.name for s in group)
        scope = Scope(label, str(config.path), group[0].line)
        path_findings, facts = lint_path(value, settings, scope, cwd)
        findings += path_findings
        for sh in shadows(facts, settings.sensitive_commands):
            if sh.hidden:
                notes.append(f"{label}: {sh.command} -> {sh.path} (hides {', '.join(sh.hidden)})")
    return ConfigLint(findings, notes)
