"""The verifier goes to the user once and is kept nowhere beside the log; the state file
holds only keys of sessions after the last seal, never one that signed."""

from __future__ import annotations

import stat
from pathlib import Path

from mcpshim.seal import keys
from tests.fixtures.home import Home, dash_path, install
from tests.fixtures.sealhelp import cli, load_state, seal, seals_in, shim_execs, verify


def _every_file(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def test_the_verifier_is_given_once_and_kept_nowhere_beside_the_log(
    home: Home, tmp_path: Path
) -> None:
    install(home, ["true"], dash_path())
    shim_execs(home, "s1", "one")
    out_file = tmp_path / "elsewhere" / "verifier"
    out_file.parent.mkdir()
    init = ["log", "seal", "--init", "--period", "1", "--no-anchor"]
    done = cli(home, *init, "--verifier-out", str(out_file))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    text = out_file.read_text().strip()
    assert text not in done.stdout and text not in done.stderr
    again = cli(home, *init, "--force", "--verifier-out", str(out_file))
    assert again.returncode == 2 and "never written over" in again.stderr
    shim_execs(home, "s1", "two")
    seal(home)
    v = keys.Verifier.parse(text)
    walker = keys.KeyWalker(v)
    used = [walker.key(s.epoch, s.sealer) for s in seals_in(home.loc.log_file).values()]
    secrets = [v.root, keys.first_key(v.root), *(k for k in used if k is not None)]
    assert len(secrets) == 4
    everything = _every_file(home.root)  # the log, the state, the lock: all of HOME
    for secret in secrets:
        assert secret not in everything and secret.hex().encode() not in everything
    # what the state holds is the next session's key, derived from the verifier
    st = load_state(home)
    last = max(seals_in(home.loc.log_file).values(), key=lambda s: s.n)
    assert (st.epoch, st.session) > (last.epoch, last.sealer)
    assert walker.key(st.epoch, st.session) == bytes.fromhex(st.session_key)
    rc, doc = verify(home, "--key", str(out_file))
    assert rc == 0 and doc["keyed"], doc["problems"]
