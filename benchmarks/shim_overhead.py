"""Added cost of one exec through an mcpshim shim, against baselines run in the same process.

Runs `git --version` N times each way, interleaved in a new random order each round
(direct, the dash `exec` floor, the article's wrapper, the sh shim, the native shim, and
Snoopy where Debian's `snoopy` is installed), and prints the median wall time per exec, the
median added over direct, and the ratio, then the same for CPU time (user + system of the
child, from wait4), which load moves less. Shims and logs live in a throwaway directory.

The runs come from one small C harness (vfork + execve, built here with cc): Snoopy is
preloaded into it (LD_PRELOAD), so its execve wrapper logs the Snoopy variant's exec; every
other variant is exec'd by the raw system call, which no preload sees, and no child
inherits the preload. Snoopy 2.5 reads /etc/snoopy.ini only (SNOOPY_INI is set too, for
versions that take it): as root the harness runs in a mount namespace of its own where a
file under the throwaway directory is bind-mounted over it (output to a file there); the
system's /etc/snoopy.ini and /etc/ld.so.preload are never touched. Elsewhere Snoopy logs
to its configured output and the note says so.

--options adds the native shim started by glibc, linked statically and dynamically (the
same program: what a libc's start-up costs). With --against REV, the sh shim as the commit
REV of this repository wrote it runs in the same rounds (its `mcpshim install`, from
`git archive`), and the difference is printed: how the sh shim's cost changed since REV.
Without a C compiler the Python runner (posix_spawn) times the sh variants alone.

    python benchmarks/shim_overhead.py [-n 400] [--command git --version] [--against REV]
                                       [--options] [--snoopy PATH]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from mcpshim.paths import Locations
from mcpshim.shim import install, native, native_install, targets
from mcpshim.shim.manifest import load_manifest
from throwaway import throwaway_home

ARTICLE_WRAPPER = """#!/bin/sh
printf '%s pid=%s ppid=%s cwd=%s argv=%s\\n' \\
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$$" "$PPID" "$(pwd)" "$*" \\
  >> "{log}"
exec {target} "$@"
"""
SNOOPY = "/usr/lib/x86_64-linux-gnu/libsnoopy.so"


def spawn_wait(argv: list[str], devnull: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run (the Python runner)."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(
        argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)]
    )
    _, _, usage = os.wait4(pid, 0)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def install_at(rev: str, root: Path, name: str, target: str) -> Path:
    """The shim for name as the commit rev wrote it (its own `mcpshim install`)."""
    repo = Path(__file__).resolve().parents[1]
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "src", "shims"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(root / "src", filter="data")
    env = {**os.environ, "PYTHONPATH": str(root / "src" / "src")}
    shims, log = root / "shims", root / "log"
    done = subprocess.run(
        [sys.executable, "-m", "mcpshim", "install", "--dir", str(shims), "--log-dir", str(log),
         "--target", f"{name}={target}", name],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"install at {rev} failed: {done.stderr.strip()}")
    return shims / name


def _harness(root: Path, cc: list[str]) -> Path:
    """benchmarks/exec_harness.c, built into the throwaway directory."""
    exe = root / "harness"
    src = Path(__file__).with_name("exec_harness.c")
    subprocess.run([*cc, "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def _run_harness(
    exe: Path,
    variants: dict[str, tuple[str, list[str]]],
    n: int,
    env: dict[str, str],
    ini: Path | None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    spec = exe.with_name("spec")
    spec.write_bytes(
        b"".join(
            mode.encode() + b"".join(os.fsencode(a) + b"\0" for a in argv) + b"\0"
            for mode, argv in variants.values()
        )
    )
    cmd = [str(exe), str(spec), str(n), str(random.randrange(1 << 30))]
    if ini is not None:  # Snoopy's config file, in this process's mount namespace only
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /etc/snoopy.ini && exec "$@"', str(ini), *cmd]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"harness failed: {out.stderr.strip()}")
    keys = list(variants)
    wall: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[float]] = {k: [] for k in keys}
    for line in out.stdout.splitlines():
        i, ns, us = line.split()
        wall[keys[int(i)]].append(int(ns) / 1e9)
        cpu[keys[int(i)]].append(int(us) / 1e6)
    return wall, cpu


def _python_runner(
    variants: dict[str, tuple[str, list[str]]], n: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    devnull = os.open(os.devnull, os.O_WRONLY)
    for _, argv in variants.values():  # warm caches once
        spawn_wait(argv, devnull)
    order = list(variants.items())
    for _ in range(n):
        random.shuffle(order)  # no variant always runs right after another
        for key, (_, argv) in order:
            w, c = spawn_wait(argv, devnull)
            wall[key].append(w)
            cpu[key].append(c)
    os.close(devnull)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=400, help="runs per variant (>= 300)")
    ap.add_argument("--command", nargs="+", default=["git", "--version"])
    ap.add_argument("--against", metavar="REV", help="also the sh shim of this commit")
    ap.add_argument("--options", action="store_true", help="also the native shim on glibc")
    ap.add_argument("--snoopy", default=SNOOPY, help="Snoopy's library (default: Debian's)")
    opts = ap.parse_args()
    name, *args = opts.command
    target = shutil.which(name, path=":".join(targets.trusted_search_path()))
    if target is None:
        print(f"{name} not found", file=sys.stderr)
        return 2
    cc = native.find_compiler()
    with tempfile.TemporaryDirectory(prefix="mcpshim-bench-") as tmp:
        root = Path(tmp)
        loc = Locations(root / "shims", root / "log")
        install.install(loc, [name], {})
        wrapper = root / "wrapper"
        wrapper.write_text(ARTICLE_WRAPPER.format(log=root / "article.log", target=target))
        wrapper.chmod(0o755)
        variants: dict[str, tuple[str, list[str]]] = {
            "direct": ("R", [target, *args]),
            "dash -c exec (floor)": ("R", ["/bin/sh", "-c", f'exec {target} "$@"', name, *args]),
            "article wrapper": ("R", [str(wrapper), *args]),
            "sh shim": ("R", [str(loc.shim_dir / name), *args]),
        }
        native_logs: list[Path] = []
        env = dict(os.environ)
        ini: Path | None = None
        if cc is not None and native.unsupported_reason() is None:
            nloc = Locations(root / "native-shims", root / "native-log")
            install.install(nloc, [name], {}, native_mode="require")
            variants["native shim"] = ("R", [str(nloc.shim_dir / name), *args])
            native_logs.append(nloc.log_file)
            if opts.options:
                m = load_manifest(nloc.shim_dir)
                assert m is not None
                cfg = native_install.config_for(
                    name, target, str(nloc.log_dir), "run", m.interpreter, False,
                    targets.known_shells(), nloc.shim_dir,
                )  # fmt: skip
                for label, flags in native.OPTIONS.items():
                    exe = root / f"native-{label.replace(' ', '-')}" / name
                    exe.parent.mkdir()
                    exe.write_bytes(native.build(native.render_config(cfg), cc, flags=flags))
                    exe.chmod(0o755)
                    variants[f"native, {label}"] = ("R", [str(exe), *args])
            if os.path.exists(opts.snoopy):
                ini = root / "snoopy.ini"
                ini.write_text(f"[snoopy]\noutput = file:{root / 'snoopy.log'}\n")
                env.update(LD_PRELOAD=opts.snoopy, SNOOPY_INI=str(ini))
                variants["snoopy (preloaded)"] = ("L", [target, *args])
                if not (os.geteuid() == 0 and shutil.which("unshare")
                        and os.path.exists("/etc/snoopy.ini")):  # fmt: skip
                    ini = None
                    print("note: Snoopy logs to its configured output (not root)")
        if opts.against:
            old = install_at(opts.against, root / "against", name, target)
            variants[f"sh shim at {opts.against}"[:24]] = ("R", [str(old), *args])
        if cc is not None:
            times, cpu = _run_harness(_harness(root, cc), variants, opts.n, env, ini)
        else:
            print("no C compiler: the Python runner, sh variants only", file=sys.stderr)
            times, cpu = _python_runner(variants, opts.n)
        print(f"{' '.join(opts.command)}: {opts.n} runs each, interleaved; median per exec")
        for label, table in (("wall", times), ("cpu", cpu)):
            base = statistics.median(table["direct"])
            print(f"{label + ' time':26} {'ms':>8} {'added ms':>9} {'ratio':>6}")
            for key, ts in table.items():
                med = statistics.median(ts)
                print(f"{key:26} {med * 1e3:8.3f} {(med - base) * 1e3:9.3f} {med / base:6.2f}")
        for label, table in (("wall", times), ("cpu", cpu)):
            base = statistics.median(table["direct"])
            added = {k: statistics.median(v) - base for k, v in table.items()}
            if "snoopy (preloaded)" in added and "native shim" in added:
                snoopy = added["snoopy (preloaded)"]
                if snoopy > 0:
                    ratio = f"{added['native shim'] / snoopy:.2f}"
                else:
                    ratio = "n/a (Snoopy adds nothing measurable: noise)"
                print(f"native shim's added {label} time / Snoopy's: {ratio} (bound: 2)")
            if opts.against:
                d = added["sh shim"] - added[list(variants)[-1]]
                print(f"this sh shim minus the one at {opts.against}, {label}: {d * 1e3:+.3f} ms")
        runs = opts.n + 1
        sh_records = loc.log_file.read_bytes().count(b"\0\n")
        print(f"records by the sh shim: {sh_records} ({runs})")
        for log in native_logs:
            got = log.read_bytes().count(b"\0\n")
            want = runs * (1 + (len(native.OPTIONS) if opts.options else 0))
            print(f"records by the native shims: {got} ({want})")
        if ini is not None:
            lines = (root / "snoopy.log").read_bytes().count(b"\n")
            print(f"lines Snoopy logged: {lines} ({runs}, and the harness's own start)")
    return 0


if __name__ == "__main__":
    throwaway_home()
    raise SystemExit(main())
