"""`mcpshim report`: a relayed session as self-contained HTML (rendered in headless Chromium)
and as markdown, from a real session with hostile process text."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession

from tests.fixtures.home import REPO, Home, home_at, home_env
from tests.fixtures.mcpscenario import attribution_of, kill_helpers, make_package, run_session

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "artifacts"
HOSTILE = "echo '<b>bold</b>' \x1b[31mred \u202eevil; exit 0"
TOKEN = "ghp_" + "R" * 36


def _session(home: Home, tmp_path: Path) -> str:
    pkg = make_package(tmp_path)

    async def script(s: ClientSession) -> None:
        await s.call_tool("git_version", {})
        await anyio.sleep(0.1)
        await s.call_tool("shell", {"line": HOSTILE, "token": TOKEN})
        await anyio.sleep(0.1)
        await s.call_tool("run_test", {"package_dir": str(pkg)})
        await anyio.sleep(0.2)
        await s.read_resource("demo://readme")

    run_session(home, "S-report", script)
    kill_helpers(attribution_of(home, "S-report"))
    return "S-report"


def _report(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mcpshim", "report", "--dir", str(home.loc.shim_dir), *args]
    return subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Home]:
    """One real session for every test of this module: (html, markdown)."""
    tmp = tmp_path_factory.mktemp("report")
    root = tmp / "home"
    root.mkdir()
    home = home_at(root, home_env(root))
    session = _session(home, tmp)
    html_file, md_file = tmp / "out" / "report.html", tmp / "report.md"
    done = _report(home, "-o", str(html_file))  # default: the last --mcp session
    assert done.returncode == 0, done.stderr
    # it says which session it wrote
    said = r": session S-report: 4 tool call\(s\), \d+ finding\(s\)\n"
    assert re.fullmatch(f"wrote {re.escape(str(html_file))}{said}", done.stdout)
    done = _report(home, "--session", session, "--format", "md", "-o", str(md_file))
    assert done.returncode == 0, done.stderr
    return html_file.read_text(), md_file.read_text(), home


def test_html_is_self_contained_and_escaped(reports: tuple[str, str, Home]) -> None:
    html, _, _ = reports
    assert html.startswith("<!doctype html>")
    assert "default-src 'none'" in html  # the browser may load nothing
    for pattern in (r"<script", r"\ssrc=", r"<link", r"href=", r"url\(", r"@import", r"://"):
        hits = [m for m in re.findall(pattern, html) if m != "://" or "demo://readme" not in html]
        assert pattern == "://" or not hits, pattern
    assert "https://" not in html and "http://" not in html
    # Process text is terminal-escaped, then HTML-escaped.
    assert "<b>bold</b>" not in html and "\x1b" not in html and "\u202e" not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "\\e[31m" in html and "\\u202e" in html
    assert TOKEN not in html and "[REDACTED:" in html
    for text in ("git_version", "run_test", "demo://readme", "MCS501", "sleep"):
        assert text in html, text


def test_markdown_for_a_review(reports: tuple[str, str, Home]) -> None:
    _, md, _ = reports
    assert md.startswith("# mcpshim session S-report")
    assert "| 3 |" in md and "`run_test`" in md
    assert "no response" not in md  # the last call's response is recorded too
    assert "\x1b" not in md and "\u202e" not in md and TOKEN not in md
    # Markup from process text only ever sits inside code spans, where it is literal.
    assert "<b>" not in re.sub(r"(`+).*?\1", "", md)
    # quoted argv in findings keeps single backslashes ($'echo \'<b>...'), never doubled
    findings = md.split("## Findings", 1)[1]
    assert "echo \\'<b>bold</b>\\'" in findings and "\\\\'" not in findings
    assert "### #3 tools/call run\\_test" in md
    assert re.search(r"- \*\*MEDIUM\*\* MCS501 process-outlived-tool-call", md)
    # the helper sits under npm -> ... in the call's process list, indented below it
    section = md.split("### #3", 1)[1].split("###", 1)[0]
    lines = [ln for ln in section.splitlines() if "pid " in ln]
    assert "npm" in lines[0] and "sleep" in lines[-1]
    assert len(lines[-1]) - len(lines[-1].lstrip()) > 0


def test_report_errors_name_the_session(reports: tuple[str, str, Home], tmp_path: Path) -> None:
    _, _, home = reports
    done = _report(home, "--session", "nope", "-o", str(tmp_path / "x.html"))
    assert done.returncode == 2
    assert done.stderr.startswith("mcpshim: error: no such session 'nope'")
    env = {**home.env, "MCPSHIM_SESSION": "S-plain"}
    subprocess.run([str(home.loc.shim_dir / "git"), "--version"], env=env, capture_output=True)
    done = _report(home, "--session", "S-plain", "-o", str(tmp_path / "x.html"))
    assert done.returncode == 2 and "session S-plain was not run with --mcp" in done.stderr
    done = _report(home)  # html needs a file
    assert done.returncode == 2 and "--format html needs -o" in done.stderr
    assert "Traceback" not in done.stderr


def test_md_goes_to_stdout_and_says_which_session(reports: tuple[str, str, Home]) -> None:
    _, md, home = reports
    done = _report(home, "--session", "S-rep", "--format", "md")  # a unique prefix
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# mcpshim session S-report")
    assert done.stdout.split("\n", 3)[3] == md.split("\n", 3)[3]  # the same report as -o
    assert re.fullmatch(
        r"mcpshim: report of session S-report: 4 tool call\(s\), \d+ finding\(s\)\n", done.stderr
    )


def test_arguments_response_and_server_are_shown(reports: tuple[str, str, Home]) -> None:
    html, md, _ = reports
    # arguments are indented JSON on lines of their own, never a literal \n
    assert "<pre>{\n &quot;line&quot;: " in html and "{\\n" not in html
    # "redacted" only on the call whose arguments lost a credential
    labels = re.findall(r"<summary>(arguments[^<]*)</summary>", html)
    assert len(labels) == 4 and labels.count("arguments") == 3
    [redacted] = [x for x in labels if x != "arguments"]
    assert redacted.startswith("arguments (redacted: ")
    assert md.count("(redacted: ") == 1
    # each response's size and hash; the server's initialize exchange
    assert len(re.findall(r"response [\d,]+ B sha256 [0-9a-f]{16}", html)) == 4
    assert "| response |" in md and len(re.findall(r"\| [\d,]+ B sha256 [0-9a-f]{16}", md)) == 4
    assert '<section id="server">' in html and "mcpshim-tools-fixture" in html
    assert "## Server (initialize)" in md and "mcpshim-tools-fixture" in md


def test_all_sessions_on_a_link_free_index(reports: tuple[str, str, Home], tmp_path: Path) -> None:
    _, _, home = reports
    out = tmp_path / "all"
    done = _report(home, "--all", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'S-report.html'}: session S-report" in done.stdout
    assert f"wrote {out / 'index.html'}: 1 relayed session(s)" in done.stdout
    index = (out / "index.html").read_text()
    assert "S-report" in index and "S-report.html" in index and "MCS501" in index
    assert "<a" not in index and "href" not in index and "<script" not in index
    assert "default-src 'none'" in index
    assert (out / "S-report.html").read_text().startswith("<!doctype html>")
    done = _report(home, "--all", "--format", "md", "-o", str(out))
    assert (out / "index.md").read_text().startswith("# mcpshim sessions (1)")
    done = _report(home, "--all")
    assert done.returncode == 2 and "-o DIR" in done.stderr


def test_sessions_lists_the_relayed_session(reports: tuple[str, str, Home]) -> None:
    _, _, home = reports
    argv = [sys.executable, "-m", "mcpshim", "sessions", "--format", "json"]
    done = subprocess.run(argv, env=home.env, capture_output=True, text=True, timeout=120)
    [s] = [s for s in json.loads(done.stdout)["sessions"] if s["id"] == "S-report"]
    assert s["relayed"] and s["tool_calls"] == 3  # tools/call only (not resources/read)
    assert s["name"] == "relayhost"  # the session's own name (run --name) comes first
    assert str(s["server"]).startswith("mcpshim-tools-fixture")  # what initialize said
    assert s["severity"] in ("medium", "high")  # report reviewed it


def test_html_renders_in_headless_chromium(reports: tuple[str, str, Home], tmp_path: Path) -> None:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing in CI (scripts/system-deps.sh installs chromium)")
        pytest.skip(f"{CHROMIUM} not installed (Debian package chromium; CI installs it)")
    html, _, _ = reports
    page = tmp_path / "report.html"
    page.write_text(html)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    base = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]

    def chromium(*args: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path / f"profile-{len(args)}"
        profile.mkdir()
        return subprocess.run(
            [*base, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
        )

    done = chromium(f"--screenshot={shot}", "--window-size=1280,2000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = chromium("--dump-dom").stdout
    assert 'id="timeline"' in dom and 'id="tree"' in dom and 'id="findings"' in dom
    for text in ("git_version", "run_test", "npm", "sleep", "MCS501", "process-outlived-tool-call"):
        assert text in dom, text
    # The hostile argument is text in the DOM, never an element.
    assert "<b>bold</b>" not in dom and "&lt;b&gt;bold&lt;/b&gt;" in dom
    assert "<script" not in dom
    shutil.copy(page, ARTIFACTS / "report.html")
