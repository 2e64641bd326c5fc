"""Shim scripts: render (pure), install, list, uninstall, and the manifest that owns them.

Like pre-commit's hook files, every shim carries a marker line; mcpshim only ever overwrites
or deletes a file that carries it. Targets are pinned once, at install time, from a trusted
search path, never from the caller's PATH.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import tomli_w

from mcpshim import redact
from mcpshim.errors import InputError, UsageError
from mcpshim.execlog import write_boot_anchor
from mcpshim.paths import Locations, default_log_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "DEFAULT_COMMANDS",
    "MARKER",
    "InstallResult",
    "Manifest",
    "ShimEntry",
    "ShimStatus",
    "install",
    "list_shims",
    "load_manifest",
    "locations_for",
    "path_line",
    "render_shim",
    "resolve_target",
    "trusted_search_path",
    "uninstall",
    "unsafe_reason",
]

MARKER = "# mcpshim-shim v1"
DEFAULT_COMMANDS = ("git", "ssh", "sh", "node", "npm")
OnFailure = Literal["run", "refuse"]
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-")


SCRUB_LIB = ".mcpshim-scrub.sh"


def _template(name: str) -> str:
    try:
        return (resources.files("mcpshim") / "shims" / name).read_text()
    except (FileNotFoundError, NotADirectoryError):
        # Running from a source checkout (editable install): the templates sit at the top.
        return (Path(__file__).resolve().parents[2] / "shims" / name).read_text()


def check_name(name: str) -> str:
    if not name or name.startswith((".", "-")) or not set(name) <= _NAME_OK:
        raise UsageError(f"not a command name: {name!r}")
    return name


def render_scrub() -> str:
    """The scrubber the shims source when an argument may hold a credential."""
    text = _template("scrub.sh")
    text = text.replace("@@OPTION_CASES@@", redact.sh_option_cases())
    text = text.replace("@@OPTION_NAMES@@", redact.sh_option_names())
    return text.replace("@@TOKEN_CALLS@@", redact.sh_token_calls())


def render_shim(
    name: str,
    target: str,
    log_dir: str,
    on_failure: OnFailure = "run",
    interpreter: str = "/bin/sh",
    scrub_lib: str | None = None,
    shells: Iterable[str] = ("/bin/sh",),
) -> str:
    """The shim's text. Every value enters the script through shlex.quote only."""
    check_name(name)
    scrub = scrub_lib or os.path.join(os.path.dirname(log_dir), SCRUB_LIB)
    for label, value in (
        ("target", target),
        ("log dir", log_dir),
        ("interpreter", interpreter),
        ("scrubber", scrub),
    ):
        if not os.path.isabs(value) or "\n" in value:
            raise UsageError(f"{label} must be an absolute path: {value!r}")
    if " " in interpreter or "\t" in interpreter:
        raise UsageError(f"interpreter path cannot hold blanks (shebang): {interpreter!r}")
    if on_failure not in ("run", "refuse"):
        raise UsageError(f"--on-log-failure must be run or refuse, not {on_failure!r}")
    text = _template("shim.sh")
    subs = {
        "@@INTERP@@": interpreter,
        "@@LOGDIR@@": shlex.quote(log_dir),
        "@@TARGET@@": shlex.quote(target),
        "@@NAME@@": shlex.quote(name),
        "@@ONFAIL@@": on_failure,
        "@@SCRUBLIB@@": shlex.quote(scrub),
        "@@TRIGGERS@@": redact.sh_triggers(),
        "@@SHELLS@@": " ".join(shlex.quote(p) for p in dict.fromkeys(["/bin/sh", *shells])),
    }
    for key, value in subs.items():
        text = text.replace(key, value)
    return text


# ---- where targets may come from ---------------------------------------------------------


def trusted_search_path() -> list[str]:
    """The system default path (confstr CS_PATH) plus /usr/local/bin and /opt/homebrew/bin."""
    try:
        cs = os.confstr("CS_PATH") or ""
    except (ValueError, OSError, AttributeError):
        cs = ""
    dirs = [d for d in (cs or "/usr/bin:/bin").split(":") if d]
    for extra in ("/usr/local/bin", "/opt/homebrew/bin"):
        if extra not in dirs:
            dirs.append(extra)
    return dirs


def temp_dirs() -> list[str]:
    dirs = ["/tmp", "/var/tmp", "/dev/shm", "/private/tmp", "/private/var/folders"]
    for d in (os.environ.get("TMPDIR"), tempfile.gettempdir()):
        if d and d not in dirs:
            dirs.append(d.rstrip("/") or "/")
    return [os.path.realpath(d) for d in dirs] + dirs


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def unsafe_reason(path: str) -> str | None:
    """Why a target path should not be trusted, or None."""
    real = os.path.realpath(path)
    for p in {path, real}:
        for t in temp_dirs():
            if _under(p, t):
                return f"{p} is in a temporary directory ({t})"
        parent = os.path.dirname(p)
        st = os.stat(parent)
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{parent} is group- or world-writable"
    st = os.stat(real)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{real} itself is group- or world-writable"
    return None


def resolve_target(name: str, search: Iterable[str], shim_dir: Path) -> str | None:
    shim_real = os.path.realpath(shim_dir)
    for d in search:
        cand = os.path.join(d, name)
        if (
            os.path.isfile(cand)
            and os.access(cand, os.X_OK)
            and os.path.realpath(os.path.dirname(cand)) != shim_real
        ):
            return cand
    return None


def _sha256(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


# ---- manifest ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShimEntry:
    name: str
    target: str
    sha256: str
    size: int
    installed: datetime
    shim_sha256: str

    def to_toml(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "sha256": self.sha256,
            "size": self.size,
            "installed": self.installed,
            "shim_sha256": self.shim_sha256,
        }


@dataclass(frozen=True)
class Manifest:
    log_dir: str
    on_log_failure: OnFailure
    interpreter: str
    shims: Mapping[str, ShimEntry]

    def to_toml(self) -> dict[str, Any]:
        return {
            "version": 1,
            "log_dir": self.log_dir,
            "on_log_failure": self.on_log_failure,
            "interpreter": self.interpreter,
            "shims": {n: e.to_toml() for n, e in sorted(self.shims.items())},
        }


def load_manifest(shim_dir: Path) -> Manifest | None:
    path = shim_dir / "manifest.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid manifest: {exc}") from exc
    try:
        shims = {
            n: ShimEntry(
                n, e["target"], e["sha256"], int(e["size"]), e["installed"], e["shim_sha256"]
            )
            for n, e in data.get("shims", {}).items()
        }
        return Manifest(data["log_dir"], data["on_log_failure"], data["interpreter"], shims)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: manifest lacks {exc}") from exc


def _write_manifest(shim_dir: Path, manifest: Manifest) -> None:
    path = shim_dir / "manifest.toml"
    tmp = path.with_name(f".manifest.{os.getpid()}.tmp")
    tmp.write_text(
        "# Written by mcpshim: the shims in this directory and the targets they pin.\n"
        + tomli_w.dumps(manifest.to_toml())
    )
    os.replace(tmp, path)


def locations_for(shim_dir: Path, log_dir: Path | None = None) -> Locations:
    """The log a shim directory is pinned to (from its manifest), unless one is given."""
    if log_dir is None:
        m = load_manifest(shim_dir)
        log_dir = Path(m.log_dir) if m else default_log_dir()
    return Locations(shim_dir=shim_dir, log_dir=log_dir)


# ---- install / uninstall / list -----------------------------------------------------------


@dataclass(frozen=True)
class InstallResult:
    installed: tuple[ShimEntry, ...]
    unchanged: tuple[str, ...]
    skipped: Mapping[str, str]


SHELL_NAMES = ("sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox")


def known_shells() -> list[str]:
    """Shell executables on the trusted path: a child of one may carry its parent's line."""
    found: dict[str, str] = {}
    for d in trusted_search_path():
        for name in SHELL_NAMES:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                found.setdefault(os.path.realpath(p), p)
    return sorted(found.values())


def default_interpreter() -> str:
    """dash when present (fastest to start), else /bin/sh."""
    for cand in ("/usr/bin/dash", "/bin/dash"):
        if os.access(cand, os.X_OK):
            return cand
    return "/bin/sh"


def _owned(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return any(line.startswith(MARKER.encode()) for line in head.split(b"\n")[:3])


def _replace(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


def install(
    loc: Locations,
    names: Iterable[str],
    targets: Mapping[str, str],
    on_failure: OnFailure = "run",
    allow_unsafe: bool = False,
    interpreter: str | None = None,
) -> InstallResult:
    requested = list(dict.fromkeys([*names, *targets]))
    explicit = bool(requested)
    if not explicit:
        requested = list(DEFAULT_COMMANDS)
    for n in requested:
        check_name(n)
    loc.shim_dir.mkdir(parents=True, exist_ok=True)
    for d in (loc.log_dir, loc.spill_dir, loc.boot_dir, loc.parents_dir):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_boot_anchor(loc)
    os.close(os.open(loc.lock_file, os.O_WRONLY | os.O_CREAT, 0o600))
    os.close(os.open(loc.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))

    scrub_path = loc.shim_dir / SCRUB_LIB
    scrub_text = render_scrub()
    if scrub_path.exists() and not _owned(scrub_path):
        raise InputError(f"{scrub_path} exists and was not written by mcpshim; left alone")
    if not scrub_path.exists() or scrub_path.read_text() != scrub_text:
        _replace(scrub_path, scrub_text, 0o644)

    old = load_manifest(loc.shim_dir)
    interp = interpreter or (old.interpreter if old else default_interpreter())
    entries = dict(old.shims) if old else {}
    search = trusted_search_path()
    shells = known_shells()
    done: list[ShimEntry] = []
    unchanged: list[str] = []
    skipped: dict[str, str] = {}
    for name in requested:
        target = targets.get(name) or resolve_target(name, search, loc.shim_dir)
        if target is None:
            skipped[name] = "not found in " + ":".join(search)
            continue
        if not os.path.isabs(target) or not os.path.isfile(target):
            raise InputError(f"--target {name}={target}: not an absolute path to a file")
        if not os.access(target, os.X_OK):
            raise InputError(f"--target {name}={target}: not executable")
        if os.path.realpath(os.path.dirname(target)) == os.path.realpath(loc.shim_dir):
            raise InputError(f"{name}: the target {target} is in the shim directory itself")
        reason = unsafe_reason(target)
        if reason and not allow_unsafe:
            raise InputError(f"{name}: refusing target {target}: {reason} (--allow-unsafe-target)")
        text = render_shim(
            name, target, str(loc.log_dir), on_failure, interp, str(scrub_path), shells
        )
        shim_path = loc.shim_dir / name
        digest, size = _sha256(target)
        shim_digest = hashlib.sha256(text.encode()).hexdigest()
        if shim_path.exists() or shim_path.is_symlink():
            if not _owned(shim_path):
                raise InputError(f"{shim_path} exists and was not written by mcpshim; left alone")
            if shim_path.read_text() == text and name in entries:
                prev = entries[name]
                if prev.sha256 == digest:
                    unchanged.append(name)
                    continue
        _replace(shim_path, text, 0o755)
        entry = ShimEntry(
            name,
            target,
            digest,
            size,
            datetime.now(timezone.utc).replace(microsecond=0),
            shim_digest,
        )
        entries[name] = entry
        done.append(entry)
    if explicit and not done and not unchanged:
        raise InputError("nothing installed: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
    _write_manifest(loc.shim_dir, Manifest(str(loc.log_dir), on_failure, interp, entries))
    return InstallResult(tuple(done), tuple(unchanged), skipped)


def uninstall(shim_dir: Path, names: Iterable[str], everything: bool) -> list[str]:
    manifest = load_manifest(shim_dir)
    if manifest is None:
        raise InputError(f"no mcpshim manifest in {shim_dir}")
    wanted = list(manifest.shims) if everything else list(names)
    if not wanted:
        raise UsageError("name the shims to remove, or pass --all")
    unknown = [n for n in wanted if n not in manifest.shims]
    if unknown:
        raise InputError("not installed here: " + ", ".join(unknown))
    removed = []
    for n in wanted:
        p = shim_dir / n
        if _owned(p):
            p.unlink()
            removed.append(n)
    left = {k: v for k, v in manifest.shims.items() if k not in wanted}
    if left:
        _write_manifest(
            shim_dir,
            Manifest(manifest.log_dir, manifest.on_log_failure, manifest.interpreter, left),
        )
    else:
        (shim_dir / "manifest.toml").unlink()
        if _owned(shim_dir / SCRUB_LIB):
            (shim_dir / SCRUB_LIB).unlink()
    return removed


@dataclass(frozen=True)
class ShimStatus:
    entry: ShimEntry
    state: str  # ok | target-changed | target-missing | shim-missing | shim-edited

    @property
    def ok(self) -> bool:
        return self.state == "ok"


def list_shims(shim_dir: Path) -> list[ShimStatus]:
    manifest = load_manifest(shim_dir)
    if manifest is None:
        return []
    out = []
    for name, e in sorted(manifest.shims.items()):
        p = shim_dir / name
        if not p.is_file():
            state = "shim-missing"
        elif hashlib.sha256(p.read_bytes()).hexdigest() != e.shim_sha256:
            state = "shim-edited"
        elif not os.path.isfile(e.target):
            state = "target-missing"
        elif _sha256(e.target) != (e.sha256, e.size):
            state = "target-changed"
        else:
            state = "ok"
        out.append(ShimStatus(e, state))
    return out


def path_line(shim_dir: Path, shell: str) -> str:
    d = str(shim_dir)
    if shell == "fish":
        return f"set -gx PATH {shlex.quote(d)} $PATH"
    return f'export PATH={shlex.quote(d)}:"$PATH"'


def which_shell() -> str:
    return "fish" if Path(os.environ.get("SHELL", "")).name == "fish" else "sh"
