"""What a reader's own installation is (trace.configrun): a program it runs from there is
its own, not one the project's configuration chose (the whole of it, with real processes,
is tests/e2e/test_project_config.py)."""

from __future__ import annotations

from pathlib import Path

from mcpshim.trace.configrun import installation


def test_a_node_servers_installation_is_its_top_node_modules() -> None:
    # cclsp's dependencies are its own: typescript-language-server beside it
    top = b"/srv/app/node_modules"
    assert installation(top + b"/cclsp/dist/index.js") == top
    assert installation(top + b"/@scope/pkg/lib/cli.mjs") == top
    assert installation(top + b"/a/node_modules/b/x.js") == top


def test_a_python_servers_installation_is_its_virtualenv(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    site = env / "lib" / "python3.11" / "site-packages"
    (site / "server").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = bytes(site / "server" / "__main__.py")
    assert installation(script) == bytes(env)
    (env / "pyvenv.cfg").unlink()  # no virtualenv: the site-packages directory
    assert installation(script) == bytes(site)
    assert (
        installation(b"/usr/lib/python3/dist-packages/x/y.py") == b"/usr/lib/python3/dist-packages"
    )


def test_a_script_elsewhere_is_its_directorys() -> None:
    assert installation(b"/opt/tools/server.py") == b"/opt/tools"
