"""A lock approved from one call order holds for another (issue 37, item 4): what a helper
the server keeps does on its own account is the server's approval, not the tool's that
happened to start it. Real sessions of the tools fixture server through a real traced
`mcpshim run --mcp`, `approve` and `review --lock`."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession

from mcpshim.contract.lockfile import load_lock
from mcpshim.review.shapes import name_key, name_pattern
from tests.fixtures.home import Home
from tests.fixtures.mcpscenario import run_mcp_session
from tests.fixtures.runhelp import command, needs_trace


def _order(*tools: str) -> Any:
    async def script(s: ClientSession) -> None:
        for tool in tools:
            args = {"symbol": "add"} if tool != "lsp_stop" else {}
            await s.call_tool(tool, args)
            await anyio.sleep(0.2)

    return script


@needs_trace
def test_a_lazily_started_helper_is_approved_for_the_server(home: Home, tmp_path: Path) -> None:
    first = run_mcp_session(home, _order("lsp_definition", "lsp_references", "lsp_stop"))
    lock = tmp_path / "mcpshim.lock"
    done = command(home, "approve", "--session", first, "--lock", str(lock), "--yes")
    assert done.returncode == 0, done.stderr
    servers = load_lock(lock).servers
    assert len(servers) == 1, list(servers)
    [server] = servers.values()
    # the language server (sleep) is the server's, not lsp_definition's that started it
    assert any("sleep" in e.path for e in server.startup.executables), server.startup
    assert not any("sleep" in e.path for t in server.tools.values()
                   for e in t.boundary.executables)  # fmt: skip
    # and so is the socket the server opened for it in its own process, as its pattern
    [listen] = [x for x in server.startup.listens if x.endswith("/lsp.sock")]
    assert name_key(listen) == name_key(f"{listen.rsplit('/', 2)[0]}/lsp-ab_cdefg/lsp.sock")
    assert not any(t.boundary.listens for t in server.tools.values())
    for order in (("lsp_definition", "lsp_references", "lsp_stop"),
                  ("lsp_references", "lsp_definition", "lsp_stop")):  # fmt: skip
        again = run_mcp_session(home, _order(*order))
        got = command(home, "review", "--session", again, "--lock", str(lock), "--format", "json")
        assert got.returncode == 0, got.stdout + got.stderr
        doc = json.loads(got.stdout)
        assert not [f for f in doc["findings"] if f["severity"] in ("medium", "high")], doc


def test_per_run_names_are_kept_as_their_pattern() -> None:
    assert name_pattern("/tmp/org.chromium.Chromium.a1B2c3/SingletonSocket") == (
        "/tmp/org.chromium.Chromium.*/SingletonSocket"
    )
    assert name_pattern("/tmp/pw-47113/browser-Zx9Qa1.sock") == "/tmp/pw-*/browser-*.sock"
    # mkdtemp's six characters drew no digit (a third of all runs)
    for suffix in ("GuGfcB", "LbwHtB", "xyzAbc"):
        assert name_pattern(f"/tmp/org.chromium.Chromium.{suffix}/SingletonSocket") == (
            "/tmp/org.chromium.Chromium.*/SingletonSocket"
        )
    assert name_pattern("/tmp/pw-47113/browser-ZxqQab.sock") == "/tmp/pw-*/browser-*.sock"
    # a word of the name's own, a version, an address: kept as they are
    assert name_pattern("/run/dbus/system_bus_socket") == "/run/dbus/system_bus_socket"
    assert name_pattern("/home/u/.cache/ms-playwright/chromium-1148") == (
        "/home/u/.cache/ms-playwright/chromium-1148"
    )
    assert name_pattern("127.0.0.1:8080") == "127.0.0.1:8080"
    # ... and when they drew a word's case, the key names are compared by takes them for
    # one name; Python's mkdtemp too (8 of [a-z0-9_], after a prefix or none)
    for suffix in ("abcdef", "ABCDEF", "Abcdef"):
        name = f"/tmp/org.chromium.Chromium.{suffix}/SingletonSocket"
        assert name_key(name) == "/tmp/org.chromium.Chromium.*/SingletonSocket"
    assert name_key("/tmp/lsp-ab_cdefg/lsp.sock") == name_key("/tmp/lsp-k3_9xabz/lsp.sock")
    for a, b in (("tmpab_cdefg", "tmpk3z9xabz"), ("tmpabcdefgh", "tmp1_ab3xyz")):
        for x in (a, b, name_pattern(f"/tmp/{a}/s")[5:-2], name_pattern(f"/tmp/{b}/s")[5:-2]):
            assert name_key(f"/tmp/{x}/s") == "/tmp/*/s", x
    assert name_key("/tmp/tmpfile/s") == "/tmp/tmpfile/s"
    # a name's key is its pattern's, however the draw split into words
    for drawn in ("1_ab3xyz", "ab_cdefg", "k3j9xabz", "abc_9xyz", "a_b_c_d1"):
        name = f"/tmp/lsp-{drawn}/lsp.sock"
        assert name_key(name) == name_key(name_pattern(name)) == "/tmp/lsp-*/lsp.sock", name
    assert name_key("/run/dbus/system_bus_socket") == "/run/dbus/system_bus_socket"
    assert name_key("127.0.0.1:8080") == "127.0.0.1:8080"
    # a word closing a component, in any case a word is written in
    for word in ("/tmp/app.socket", "/tmp/x.Socket", "/run/app-SOCKET", "/tmp/SingletonSocket",
                 "/tmp/app.socket.sock", "/tmp/my_server"):  # fmt: skip
        assert name_pattern(word) == word


def test_every_draw_of_a_name_template_has_one_key() -> None:
    # what glibc's mkdtemp (XXXXXX of [A-Za-z0-9]) and Python's (8 of [a-z0-9_], after a
    # prefix or after "tmp") can draw: the key of each name, and of its pattern, is one
    rng = random.Random(37)
    glibc = string.ascii_letters + string.digits
    python = string.ascii_lowercase + string.digits + "_"
    templates = [
        ("/tmp/org.chromium.Chromium.{}/SingletonSocket", glibc, 6),
        ("/tmp/pw-7505d64a/browser/browser-{}.sock", glibc, 6),
        ("/tmp/lsp-{}/lsp.sock", python, 8),
        ("/tmp/tmp{}/s", python, 8),
    ]
    for template, alphabet, n in templates:
        keys = set()
        for _ in range(3000):
            name = template.format("".join(rng.choice(alphabet) for _ in range(n)))
            keys |= {name_key(name), name_key(name_pattern(name))}
        assert len(keys) == 1, (template, sorted(keys)[:5])
