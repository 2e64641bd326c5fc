"""The sealed log against an agent that edits it as the same user: each edit is found, with
the right verdict, by `mcpshim log verify` (plain chain, verifier, anchors)."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

from tests.fixtures.home import Home
from tests.fixtures.sealhelp import (
    Templates,
    anchors_file,
    cli,
    exec_with,
    init,
    kinds,
    load_state,
    records,
    reseal_plain,
    seal,
    sealed_log,
    seals_in,
    shim_execs,
    state_path,
    verify,
)


def test_a_log_never_sealed_is_a_gap(home: Home, seal_templates: Templates) -> None:
    home.loc.log_dir.mkdir(parents=True)
    home.loc.log_file.write_bytes(b"")
    rc, doc = verify(home)
    assert rc == 1 and doc["verdict"] == "gaps" and kinds(doc) == {"never-sealed"}


def test_an_untouched_log_verifies_every_way(home: Home, seal_templates: Templates) -> None:
    verifier = sealed_log(home, seal_templates)
    rc, doc = verify(home, "--key", verifier, "--anchors", str(anchors_file(home)))
    assert rc == 0, doc["problems"]
    assert doc["verdict"] == "verified" and doc["keyed"] and doc["seals"] == 3
    assert doc["anchors"] == {"checked": 3, "through": 2}
    assert doc["window"]["unsealed_records"] == 0
    # what came after the last seal is named as unsealed, and is not (yet) a failure
    shim_execs(home, "late", "after-the-seal")
    rc, doc = verify(home)
    assert rc == 0 and doc["window"]["unsealed_records"] == 1
    live = doc["segments"][-1]
    assert live["unsealed"] == [live["sealed"][-1][1], live["size"]]


def test_verify_reports_the_window(home: Home, seal_templates: Templates) -> None:
    """How far the seals ran behind: the mean and longest interval between seals (what an
    agent had to edit unsealed records in), and the age of the last seal."""
    sealed_log(home, seal_templates)
    times = [s.ms / 1000 for _, s in sorted(seals_in(home.loc.log_file).items())]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    rc, doc = verify(home)
    w = doc["window"]
    assert rc == 0 and w["seals"] == 3
    assert abs(w["longest_s"] - max(gaps)) < 1e-6 and w["longest_after"] == gaps.index(max(gaps))
    assert abs(w["mean_s"] - sum(gaps) / 2) < 1e-6
    assert w["since_last_s"] >= 0
    text = cli(home, "log", "verify").stdout
    assert f"the longest interval {max(gaps):.1f} s (after seal {w['longest_after']})" in text


def test_of_equal_intervals_the_first_is_the_longest() -> None:
    """Seals at millisecond times give equal intervals: the window names the first of them
    (the one test_verify_reports_the_window expects), not whichever a tuple's order picks."""
    from mcpshim.seal.checks import longest_gap

    assert longest_gap([(0.171, 0), (0.171, 1)]) == (0.171, 0)
    assert longest_gap([(0.1, 0), (0.3, 1), (0.2, 2)]) == (0.3, 1)
    assert longest_gap([]) is None


def test_one_byte_changed_in_an_old_record(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates)
    log = home.loc.log_file
    off, rec = exec_with(log, b"second-of-1")
    data = bytearray(log.read_bytes())
    i = off + rec.index(b"second-of-1")
    data[i] = ord("S")  # the agent rewrites history: one byte
    log.write_bytes(bytes(data))
    rc, doc = verify(home)
    assert rc == 1 and doc["verdict"] == "tampered"
    [p] = doc["problems"]
    assert p["kind"] == "altered" and p["seals"] == [0]
    assert p["where"].startswith("exec.log@0..")
    assert {"where": f"exec.log@{off}", "session": "r1"}.items() <= {
        k: v for r in p["records"] for k, v in r.items() if r["where"] == f"exec.log@{off}"
    }.items()


def test_a_record_deleted(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates)
    log = home.loc.log_file
    off, rec = exec_with(log, b"second-of-2")
    data = log.read_bytes()
    log.write_bytes(data[:off] + data[off + len(rec) :])
    rc, doc = verify(home)
    assert rc == 1
    [p] = doc["problems"]  # later ranges are found where they moved to: one damage only
    assert p["kind"] == "removed" and p["seals"] == [1]
    assert f"{len(rec)} byte(s) removed" in p["message"]
    start, end = (int(x) for x in p["where"].split("@")[1].split(".."))
    assert start < off < end
    assert {r["session"] for r in p["records"]} >= {"r2"}


def test_two_records_swapped(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates)
    log = home.loc.log_file
    (a_off, a), (_, b) = exec_with(log, b"first-of-3"), exec_with(log, b"second-of-3")
    data = log.read_bytes()
    assert data[a_off + len(a) :].startswith(b)
    log.write_bytes(data[:a_off] + b + a + data[a_off + len(a) + len(b) :])
    rc, doc = verify(home)
    [p] = doc["problems"]
    assert rc == 1 and p["kind"] == "altered" and p["seals"] == [2]


def test_the_tail_truncated(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates)
    log = home.loc.log_file
    off, _ = exec_with(log, b"second-of-3")
    os.truncate(log, off + 5)  # mid-record, and the last seal goes with it
    rc, doc = verify(home)
    assert rc == 1 and "truncated" in kinds(doc)
    # an agent that also deletes the sealer's state: the anchors still name seal 2
    os.unlink(state_path(home))
    assert verify(home)[0] == 0  # the plain chain alone cannot see a cut tail
    rc, doc = verify(home, "--anchors", str(anchors_file(home)))
    assert rc == 1 and kinds(doc) == {"truncated"}
    assert doc["problems"][0]["seals"] == [2]


def test_a_rotated_segment_deleted(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates, rotate=True)
    names = sorted(p.name for p in home.loc.log_dir.glob("exec.log*") if "lock" not in p.name)
    assert names == ["exec.log", "exec.log.000001", "exec.log.000002"]
    assert verify(home)[0] == 0
    (home.loc.log_dir / "exec.log.000002").unlink()
    rc, doc = verify(home)
    assert rc == 1 and kinds(doc) == {"missing-segment"}
    assert doc["problems"][0]["seals"] == [1]


def test_the_oldest_segment_deleted_by_hand_or_by_rotate_keep(
    home: Home, seal_templates: Templates
) -> None:
    sealed_log(home, seal_templates, rotate=True)
    saved = home.root.parent / "saved"
    shutil.copytree(home.loc.log_dir, saved)
    (home.loc.log_dir / "exec.log.000001").unlink()
    rc, doc = verify(home)
    assert rc == 1 and doc["verdict"] == "gaps" and kinds(doc) == {"start-missing"}
    # the same segment removed by rotation: rotation says so, and verify accepts it
    shutil.rmtree(home.loc.log_dir)
    shutil.copytree(saved, home.loc.log_dir)
    seal(home)  # state follows the copied files (new inodes) as new segments: none grew
    out = cli(home, "log", "rotate", "--keep", "1")
    assert out.returncode == 0, out.stderr
    seal(home)
    rc, doc = verify(home, "--anchors", str(anchors_file(home)))
    assert rc == 0, doc["problems"]  # the anchors of the pruned seals are not held against it
    assert any("rotate --keep" in n for n in doc["notes"])


def test_a_record_inserted_with_seals_recomputed_from_the_plain_chain(
    home: Home, seal_templates: Templates
) -> None:
    verifier = sealed_log(home, seal_templates)
    log = home.loc.log_file
    recs = [r for _, r in records(log)]
    i = next(i for i, r in enumerate(recs) if b"second-of-1" in r)
    forged = recs[i].replace(b"second-of-1", b"innocent-00")
    reseal_plain(home, log, [*recs[: i + 1], forged, *recs[i + 1 :]])
    # the plain chain (and the state, which the agent fixed too) cannot tell
    assert verify(home)[0] == 0
    rc, doc = verify(home, "--key", verifier)
    assert rc == 1 and kinds(doc) == {"forged"}
    assert [p["seals"] for p in doc["problems"]] == [[0], [1], [2]]
    rc, doc = verify(home, "--anchors", str(anchors_file(home)))
    assert rc == 1 and kinds(doc) == {"anchor-mismatch"}


def test_a_key_read_from_the_state_file_cannot_backdate_a_seal(
    home: Home, seal_templates: Templates
) -> None:
    """The state file holds the key of the epoch after the last seal: a same-user agent can
    read it. With it, a rewritten chain cannot keep its old dates (forged); dated after the
    last real seal it verifies, and the anchors of the seals it replaced catch it."""
    verifier = sealed_log(home, seal_templates)
    st = load_state(home)
    stolen = (st.epoch, st.session, bytes.fromhex(st.session_key))
    log = home.loc.log_file
    real = seals_in(log)
    recs = [r for _, r in records(log)]
    i = next(i for i, r in enumerate(recs) if b"second-of-2" in r)
    reseal_plain(home, log, recs[:i] + recs[i + 1 :], sign=stolen, backdate=True)
    rc, doc = verify(home, "--key", verifier)
    assert rc == 1 and kinds(doc) == {"forged"}
    assert [p["seals"] for p in doc["problems"]] == [[1], [2]]

    shutil.rmtree(home.loc.log_dir)
    sealed_log(home, seal_templates)
    recs = [r for _, r in records(log)]
    reseal_plain(home, log, recs[:i] + recs[i + 1 :], sign=stolen)
    forged = seals_in(log)
    assert forged[0] == real[0] and forged[1].time > real[2].time  # dated after every real seal
    assert verify(home, "--key", verifier)[0] == 0  # the limit docs/threat-model.md states
    rc, doc = verify(home, "--anchors", str(anchors_file(home)))
    assert rc == 1 and kinds(doc) == {"anchor-mismatch"}


def test_the_whole_log_replaced_by_a_resealed_copy(home: Home, seal_templates: Templates) -> None:
    verifier = sealed_log(home, seal_templates)
    log = home.loc.log_file
    keep = [r for _, r in records(log) if not r.startswith(b"\0R\0=1\0=seal\0=")]
    edited = [r.replace(b"second-of-2", b"innocent-02") for r in keep]
    log.write_bytes(b"".join(edited))
    os.unlink(state_path(home))
    init(home, "--no-anchor")  # the agent's own key, and no anchors of its doing
    assert verify(home)[0] == 0  # a chain recomputed from scratch passes the plain check
    rc, doc = verify(home, "--key", verifier)
    assert rc == 1 and kinds(doc) == {"foreign-key"}
    rc, doc = verify(home, "--anchors", str(anchors_file(home)))
    assert rc == 1 and "anchor-mismatch" in kinds(doc)


def test_a_spill_file_changed(home: Home, seal_templates: Templates) -> None:
    sealed_log(home, seal_templates, rounds=1)
    shim_execs(home, "big", "x" * 6000)  # over 4000 bytes: the record goes to a spill file
    seal(home)
    [spill] = list(home.loc.spill_dir.iterdir())
    data = spill.read_bytes()
    spill.write_bytes(data.replace(b"xxxx", b"yyyy", 1))
    rc, doc = verify(home)
    assert rc == 1 and kinds(doc) == {"spill-altered"}


def test_input_errors_exit_2(home: Home, seal_templates: Templates, tmp_path: Path) -> None:
    sealed_log(home, seal_templates, rounds=1)
    assert cli(home, "log", "verify", "--key", "mcpshim-verifier-1:zz").returncode == 2
    assert cli(home, "log", "verify", "--key", str(tmp_path / "nope")).returncode == 2
    assert cli(home, "log", "verify", "--anchors", str(tmp_path / "nope")).returncode == 2
    out = cli(home, "log", "seal", "--init")
    assert out.returncode == 2 and "sealed already" in out.stderr


def test_text_names_the_range_records_and_sessions(home: Home, seal_templates: Templates) -> None:
    verifier = sealed_log(home, seal_templates, rounds=2)
    log = home.loc.log_file
    off, rec = exec_with(log, b"third-of-1")
    data = log.read_bytes()
    log.write_bytes(data[:off] + data[off + len(rec) :])
    path = home.root.parent / "verifier"
    path.write_text(verifier)
    out = cli(home, "log", "verify", "--key", str(path))
    assert out.returncode == 1
    assert "verdict: TAMPERED" in out.stdout
    assert "removed exec.log@" in out.stdout and "session r1" in out.stdout
    assert "every seal checked with your verifier" in out.stdout
