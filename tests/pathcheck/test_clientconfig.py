"""MCP client configs: the position-keeping JSONC parser and the four client shapes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from mcpshim.errors import InputError, UsageError
from mcpshim.pathcheck import jsonc
from mcpshim.pathcheck.clientconfig import effective_path, expand_vars, load_config, parse_config
from tests.fixtures.home import CONFIGS

FIXTURES = CONFIGS
CLAUDE_DESKTOP = FIXTURES / "claude-desktop" / "claude_desktop_config.json"
CLAUDE_CODE = FIXTURES / "claude-code" / ".mcp.json"
CURSOR = FIXTURES / "cursor" / ".cursor" / "mcp.json"
VSCODE = FIXTURES / "vscode" / ".vscode" / "mcp.json"
ALL = [CLAUDE_DESKTOP, CLAUDE_CODE, CURSOR, VSCODE]

PLAIN_CORPUS = [
    "{}",
    "[]",
    '{"a": [1, -2.5e3, true, false, null, "x\\u00e9\\n\\"q\\""], "b": {"c": {}}}',
    '  {"dup": 1, "dup": 2}  ',
    '"just a string"',
    "0",
    '{"emoji": "\\ud83d\\ude00", "raw": "ü→"}',
    '[[[[]]], {"k": [{}]}]',
]


@pytest.mark.parametrize("text", PLAIN_CORPUS)
def test_plain_json_parses_like_stdlib(text: str) -> None:
    doc = jsonc.parse(text)
    assert doc.root.value == json.loads(text)
    assert doc.plain_json


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{"a": 1,,}', 1, 9),
        ('{\n  "a": 1\n  "b": 2\n}', 3, 3),
        ('{"a": tru}', 1, 7),
        ('{"a": "unterminated\n}', 1, 7),
        ("[1, 2", 1, 6),
        ("{} extra", 1, 4),
        ("/* open", 1, 1),
        ('{"a": 01}', 1, 8),
        ("{'a': 1}", 1, 2),
    ],
)
def test_malformed_json_reports_line_and_column(text: str, line: int, column: int) -> None:
    with pytest.raises(jsonc.JsoncError) as err:
        jsonc.parse(text)
    assert (err.value.line, err.value.column) == (line, column)
    with pytest.raises(ValueError):
        json.loads(text)  # stdlib agrees it is not JSON


def test_comments_and_trailing_commas_are_kept_with_spans() -> None:
    text = '{\n  // one\n  "a": [1, 2,], /* two */\n  "b": "x",\n}\n'
    doc = jsonc.parse(text)
    assert doc.root.value == {"a": [1, 2], "b": "x"}
    assert [c.text for c in doc.comments] == ["// one", "/* two */"]
    assert doc.trailing_commas == 2
    assert not doc.plain_json
    b = doc.root.get("b")
    assert b is not None and text[b.start : b.end] == '"x"'
    member = doc.root.member("a")
    assert member is not None and text[member.key_start : member.key_end] == '"a"'


def test_bom_is_accepted() -> None:
    assert jsonc.parse('\ufeff{"a": 1}').root.value == {"a": 1}


@pytest.mark.parametrize(
    ("path", "client", "names"),
    [
        (CLAUDE_DESKTOP, "claude-desktop", ["filesystem", "github", "sqlite"]),
        (CLAUDE_CODE, "claude-code", ["airtable", "project-tools", "sentry"]),
        (CURSOR, "cursor", ["postgres", "brave-search", "linear"]),
        (VSCODE, "vscode", ["Perplexity", "fetch", "workspace-tools", "github"]),
    ],
)
def test_four_clients(path: Path, client: str, names: list[str]) -> None:
    cfg = load_config(path)
    assert cfg.client == client
    assert [s.name for s in cfg.servers] == names
    for s in cfg.servers:
        node_text = cfg.document.text[s.node.start : s.node.end]
        assert node_text.startswith("{")
        assert s.line == cfg.document.text.count("\n", 0, s.node.start) + 1
    if path != VSCODE:  # plain JSON files must agree with the stdlib reader
        assert cfg.document.root.value == json.loads(path.read_text())


def test_vscode_values() -> None:
    cfg = load_config(VSCODE)
    p = cfg.server("Perplexity")
    assert p.command == "docker"
    assert p.env == {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}
    assert cfg.server("github").stdio is False
    assert cfg.server("github").url == "https://api.githubcopilot.com/mcp/"
    assert len(cfg.document.comments) == 5


def test_unknown_server_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="servers: filesystem, github, sqlite"):
        load_config(CLAUDE_DESKTOP).server("nope")


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }', ":4:4", "expected"),
        ('{"mcpServers": {"a": {"command": 3}}}', ":1:34", "command must be a string"),
        ('{"mcpServers": {"a": {"args": ["x", 1]}}}', ":1:31", "args must be an array"),
        ('{"mcpServers": {"a": {"env": {"K": 1}}}}', ":1:36", "env.K must be a string"),
        ('{"mcpServers": []}', ":1:16", "must be an object"),
        ('{"other": {}}', "", "no `mcpServers`"),
        ("[1]", ":1:1", "top level must be an object"),
    ],
)
def test_malformed_config_names_file_and_position(
    tmp_path: Path, text: str, where: str, what: str
) -> None:
    p = tmp_path / "claude_desktop_config.json"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}{where}"), msg
    assert what in msg


def test_not_utf8_names_position(tmp_path: Path) -> None:
    p = tmp_path / "mcp.json"
    p.write_bytes(b'{\n  "servers": {"\xff": {}}}')
    with pytest.raises(InputError, match=r"mcp.json:2:16: not UTF-8"):
        load_config(p)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_config(tmp_path / "absent.json")


def test_effective_path_sources() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/alice"}
    desk = load_config(CLAUDE_DESKTOP)
    eff = effective_path(desk, desk.server("github"), env)
    assert eff.value == "/usr/bin:/bin" and not eff.from_config
    assert "Claude Desktop passes on its own PATH" in eff.source
    code = load_config(CLAUDE_CODE)
    eff = effective_path(code, code.server("project-tools"), env)
    assert eff.value == "/home/alice/.local/bin:/usr/local/bin:/usr/bin:/bin"
    assert eff.from_config and "${HOME}" in eff.source
    vs = load_config(VSCODE)
    eff = effective_path(vs, vs.server("workspace-tools"), env)
    assert eff.value == f"{VSCODE.parent.parent.resolve()}/node_modules/.bin:/usr/bin:/bin"


def test_expand_vars_per_client(tmp_path: Path) -> None:
    env = {"TOKEN": "t", "HOME": "/h"}
    code = parse_config(tmp_path / ".mcp.json", b'{"mcpServers": {}}')
    got = expand_vars("${TOKEN}:${MISSING:-dflt}:${env:TOKEN}", code, env)[0]
    assert got == "t:dflt:${env:TOKEN}"
    vs = parse_config(tmp_path / ".vscode" / "mcp.json", b'{"servers": {}}')
    assert expand_vars("${env:TOKEN}:${userHome}:${TOKEN}", vs, env)[0] == "t:/h:${TOKEN}"
    desk = parse_config(tmp_path / "claude_desktop_config.json", b'{"mcpServers": {}}')
    assert expand_vars("${TOKEN}", desk, env) == ("${TOKEN}", ())


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.choice(["obj", "arr", "str", "num", "lit"] if depth < 4 else ["str", "num", "lit"])
    if kind == "obj":
        return {_random_str(rng): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if kind == "arr":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "str":
        return _random_str(rng)
    if kind == "num":
        return rng.choice([0, -1, 17, 3.25, -1e-7, 12345678901234567890])
    return rng.choice([True, False, None])


def _random_str(rng: random.Random) -> str:
    alphabet = 'ab "\\/\n\t\u00e9\u2028\U0001f600{}[],:'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))


@pytest.mark.parametrize("seed", range(40))
def test_random_documents_parse_like_stdlib(seed: int) -> None:
    rng = random.Random(seed)
    value = _random_value(rng)
    for text in (
        json.dumps(value),
        json.dumps(value, indent=2, ensure_ascii=False),
        json.dumps(value, indent="\t", separators=(" ,", " : ")),
    ):
        doc = jsonc.parse(text)
        assert doc.root.value == json.loads(text)
        for node in _nodes(doc.root):  # every span holds exactly that value's text
            assert json.loads(text[node.start : node.end]) == node.value


def _nodes(node: jsonc.Node) -> list[jsonc.Node]:
    out = [node]
    for m in node.members:
        out += _nodes(m.value)
    for i in node.items:
        out += _nodes(i)
    return out
