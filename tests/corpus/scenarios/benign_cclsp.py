"""cclsp 0.7.0 (npm, pinned) with typescript-language-server 4.4.1 and TypeScript 5.9.3
(pinned): an agent navigates a TypeScript project through a language server.

cclsp reads its configuration from CCLSP_CONFIG_PATH (here the user's
~/.config/claude/cclsp.json, as `cclsp setup --user` writes it), which names the language
server's command. It preloads a server at start only for extensions it finds within
three directory levels; this project's sources sit deeper (packages/calc/src/lib), so
the language server starts in the first call that needs it (find_definition), which is
what makes the scenario deterministic, and cclsp keeps it for every later call.
typescript-language-server (`#!/usr/bin/env node`) forks tsserver with node's own path.

True: node was found through PATH and reached its pinned shim at the server's start and
when find_definition started the language server (INFO MCS101); find_definition started
node and typescript-language-server, which its name does not explain (LOW MCS502, a
hint); tsserver and its typings installer are node running itself by its own path (INFO
MCS405, as git running git-core is); traced, typescript-language-server's script ran
from the package's node_modules/.bin, outside the trusted directories (LOW MCS119, as
vitest's does). The language server, tsserver and its typings
installer are helpers the server keeps between calls: when cclsp exits it signals the
language server and exits at once, and they end on that signal moments later, within the
settle `run` gives the family before it counts survivors: no survivor, three helpers kept
and gone by the session's end (INFO MCS501; untraced, as many as the sampler saw).
"""

from __future__ import annotations

import json
from typing import Any

from tests.corpus.harness import NO_CALL, Expect, Scenario, Workspace, servers_installed
from tests.corpus.worlds import plant

SRC = "packages/calc/src/lib"
FILES = {
    f"{SRC}/math.ts": "export function add(a: number, b: number): number {\n  return a + b;\n}\n",
    f"{SRC}/main.ts": 'import { add } from "./math";\n\nexport const three = add(1, 2);\n',
    "tsconfig.json": json.dumps({"compilerOptions": {"strict": True}, "include": ["packages"]}),
}


def config(w: Workspace, command: list[str]) -> dict[str, Any]:
    return {"servers": [{"extensions": ["ts", "js"], "command": command, "rootDir": str(w.ws)}]}


def lsp() -> str:
    return str(servers_installed() / "typescript-language-server")


def setup(w: Workspace) -> None:
    plant(w, FILES)
    user = w.home / ".config/claude/cclsp.json"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(json.dumps(config(w, [lsp(), "--stdio"])))
    w.notes["cclsp_config"] = str(user)


def server(w: Workspace) -> list[str]:
    return [str(servers_installed() / "cclsp")]


def server_env(w: Workspace) -> dict[str, str]:
    return {"CCLSP_CONFIG_PATH": str(w.notes["cclsp_config"])}


def _calls(w: Workspace) -> list[tuple[str, Any]]:
    main, math = str(w.ws / SRC / "main.ts"), str(w.ws / SRC / "math.ts")
    return [
        ("find_definition", {"file_path": main, "symbol_name": "add"}),
        ("find_references", {"file_path": math, "symbol_name": "add"}),
        ("get_diagnostics", {"file_path": main}),
    ]


START = Expect("MCS101", "info", NO_CALL, names=("node",))  # `#!/usr/bin/env node`
KEPT = Expect("MCS501", "info", NO_CALL)  # the language server's family, gone by the end
KEPT_UNTRACED = Expect("MCS501", "info", NO_CALL, optional=True)


def started(tool: str, traced: bool) -> tuple[Expect, ...]:
    """The call that started the language server."""
    if not traced:  # the shim saw env's node; the sampler, by luck, the rest
        return (
            Expect("MCS101", "info", tool, names=("node",)),
            Expect("MCS502", "low", tool, names=("node",)),
            Expect("MCS405", "info", tool, optional=True, names=("node",)),
            KEPT_UNTRACED,
        )
    return (
        Expect("MCS101", "info", tool, names=("node",)),
        Expect("MCS502", "low", tool, count=2),  # node, typescript-language-server
        Expect("MCS405", "info", tool, names=("node",)),  # tsserver: node running itself
        # the language server's script, run from the package's node_modules/.bin
        Expect("MCS119", "low", tool, names=("node_modules/.bin/typescript-language-server",)),
        KEPT,
    )


SCENARIO = Scenario(
    name="benign-cclsp",
    kind="benign",
    summary="cclsp 0.7.0 + typescript-language-server 4.4.1: definition, references, diagnostics",
    server=server,
    calls=_calls,
    setup=setup,
    server_env=server_env,
    needs=("servers",),
    run_options=("--trace-files",),  # traced: the file facts too (issue 40)
    expected=(START, *started("find_definition", traced=False)),
    traced_expected=(START, *started("find_definition", traced=True)),
)
