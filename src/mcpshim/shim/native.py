"""The native shim: shims/native.c built with the system C compiler, once per command.

The binary takes the sh shim's common path only and execs the sh shim beside it (in
`.mcpshim-sh/`, sourced with the caller's $0 and arguments) on every other one, so it needs
the sh shim's pinned values and its trigger patterns, which are compiled here into
config.h: every value a C string of octal escapes (a path with quotes, backslashes,
newlines or bytes that are not UTF-8 stays what it is), the `case` patterns a small
program of byte sets the C matcher walks. Nothing here runs the compiler's output.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mcpshim.errors import UsageError
from mcpshim.log import redact_sh
from mcpshim.shim.manifest import OnFailure

__all__ = [
    "FALLBACK_DIR",
    "FALLBACK_MARK",
    "NATIVE_MARKER",
    "NativeConfig",
    "NativeUnavailable",
    "build",
    "c_string",
    "compile_patterns",
    "find_compiler",
    "render_config",
    "source_digest",
    "unsupported_reason",
]

#: the marker the binary carries (in its .mcpshim section): install only replaces or
#: removes an ELF file that holds it
NATIVE_MARKER = b"\n# mcpshim-shim v1 native\n"
#: where the sh shims a native shim falls back to live, under the shim directory
FALLBACK_DIR = ".mcpshim-sh"
#: the first line of the fallback's `-c` text: the tracer's records know the hop by it
FALLBACK_MARK = "# mcpshim-shim v1 native fallback"
#: ELF e_machine of each architecture the raw system calls of native.c are written for
_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-=:, ")
_FLAGS = (
    "-std=gnu11",
    "-Os",
    "-static-pie",
    "-fPIE",
    "-nostdlib",
    "-ffreestanding",
    "-fno-builtin",
    "-fno-tree-loop-distribute-patterns",
    "-fstack-protector-strong",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-Wall",
    "-Wl,-z,noexecstack",
    "-Wl,-z,now",
    "-Wl,-z,relro",
    "-Wl,--build-id=none",
    "-s",
)


class NativeUnavailable(Exception):  # noqa: N818 -- a reason, said in one line by install
    """The native shim cannot be built here; the message says why in one line."""


def unsupported_reason() -> str | None:
    """Why this system gets no native shim (None: it can), before any compiler is asked."""
    if platform.system() != "Linux":
        return f"native shims are for Linux (x86_64, aarch64); this is {platform.system()}"
    if platform.machine().lower() not in _MACHINES:
        return f"native shims are for x86_64 and aarch64 Linux; this is {platform.machine()}"
    return None


def find_compiler(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The system C compiler: $CC (split like a shell word list) or `cc` on PATH."""
    env = os.environ if env is None else env
    cc = env.get("CC", "").strip()
    if cc:
        words = shlex.split(cc)
        return words if words and shutil.which(words[0]) else None
    found = shutil.which("cc", path=env.get("PATH", os.defpath))
    return [found] if found else None


def _template() -> bytes:
    try:
        return (resources.files("mcpshim") / "shims" / "native.c").read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return (Path(__file__).resolve().parents[3] / "shims" / "native.c").read_bytes()


def c_string(value: bytes, nul_ok: bool = False) -> str:
    """A C string literal holding exactly `value`: every byte outside a small safe set as a
    three-digit octal escape (which never takes the next character along, unlike \\x).
    `nul_ok`: a table whose length the C code takes from sizeof, not a string."""
    if b"\0" in value and not nul_ok:
        raise UsageError(f"a value with a NUL byte cannot be pinned: {value!r}")
    return '"' + "".join(chr(b) if b in _SAFE else f"\\{b:03o}" for b in value) + '"'


# ---- the trigger patterns: sh `case` patterns as byte sets -------------------------------

_STAR = 0xFF
_END = 0xFE
_ALL = frozenset(range(256))


def _bracket(text: str, i: int) -> tuple[frozenset[int], int] | None:
    """The bracket expression starting at text[i] == '[': its byte set and where it ends;
    None when no `]` closes it (the `[` is then a plain character, as in dash)."""
    j = i + 1
    negate = j < len(text) and text[j] == "!"
    if negate:
        j += 1
    members: list[tuple[int, bool]] = []  # (byte, quoted)
    while j < len(text):
        c = text[j]
        if c == "]" and members:
            break
        if c == "'":
            k = text.index("'", j + 1)
            members += [(ord(ch), True) for ch in text[j + 1 : k]]
            j = k + 1
            continue
        if c == "\\" and j + 1 < len(text):
            members.append((ord(text[j + 1]), True))
            j += 2
            continue
        if c in "[^" and not members:
            raise ValueError(f"unsupported bracket expression at {text[i:]!r}")
        members.append((ord(c), False))
        j += 1
    else:
        return None
    out: set[int] = set()
    k = 0
    while k < len(members):
        b, _ = members[k]
        if k + 2 < len(members) and members[k + 1] == (ord("-"), False):
            out.update(range(b, members[k + 2][0] + 1))
            k += 3
            continue
        out.add(b)
        k += 1
    if any(b > 0x7F for b in out):
        raise ValueError("a bracket expression with a character that is not ASCII")
    return (_ALL - out if negate else frozenset(out)), j + 1


def _patterns(text: str) -> list[list[frozenset[int] | None]]:
    """The `|`-separated sh patterns of `text`, each a list of items: None for `*`, else the
    set of bytes one byte may be (quoted characters, `?`, bracket expressions)."""
    pats: list[list[frozenset[int] | None]] = [[]]
    i = 0
    while i < len(text):
        c = text[i]
        cur = pats[-1]
        if c in " \t":
            i += 1
        elif c == "|":
            pats.append([])
            i += 1
        elif c == "*":
            cur.append(None)
            i += 1
        elif c == "?":
            cur.append(_ALL)
            i += 1
        elif c == "'":
            k = text.index("'", i + 1)
            cur += [frozenset([b]) for b in text[i + 1 : k].encode()]
            i = k + 1
        elif c == '"':
            k = i + 1
            while text[k] != '"':
                if text[k] == "\\" and text[k + 1] in '$`"\\\n':
                    k += 1
                cur += [frozenset([b]) for b in text[k].encode()]
                k += 1
            i = k + 1
        elif c == "\\":
            cur += [frozenset([b]) for b in text[i + 1].encode()]
            i += 2
        elif c == "[":
            got = _bracket(text, i)
            if got is None:
                cur.append(frozenset([ord("[")]))
                i += 1
            else:
                cur.append(got[0])
                i = got[1]
        elif c in "()&;<>$`":
            raise ValueError(f"unsupported character {c!r} in a trigger pattern")
        else:
            cur += [frozenset([b]) for b in c.encode()]
            i += 1
    if any(not p for p in pats):
        raise ValueError("an empty trigger pattern")
    return pats


def compile_patterns(text: str) -> tuple[bytes, bytes]:
    """(program, sets) for native.c's matcher: each pattern's items (0xff `*`, else a set's
    index) then 0xfe; the sets as 32-byte bitmaps."""
    sets: dict[frozenset[int], int] = {}
    prog = bytearray()
    for pat in _patterns(text):
        for item in pat:
            if item is None:
                prog.append(_STAR)
                continue
            if item not in sets:
                if len(sets) >= _END:
                    raise ValueError("too many distinct byte sets in the trigger patterns")
                sets[item] = len(sets)
            prog.append(sets[item])
        prog.append(_END)
    table = bytearray()
    for s in sets:
        bits = bytearray(32)
        for b in s:
            bits[b >> 3] |= 1 << (b & 7)
        table += bits
    return bytes(prog), bytes(table) or bytes(32)


# ---- the configuration and the build -------------------------------------------------------


@dataclass(frozen=True)
class NativeConfig:
    name: str
    target: str
    log_dir: str
    on_failure: OnFailure
    interpreter: str
    bash: bool
    shells: tuple[str, ...]
    fallback: str  # the sh shim it sources on every path but the common one

    def fallback_cmd(self) -> str:
        """The `-c` text the fallback runs: the sh shim, sourced (so $0 stays the caller's,
        and `$_`: the `.` is the first command). The binary checks the file is there first."""
        return f"{FALLBACK_MARK}\n. {shlex.quote(self.fallback)}\n"


def render_config(cfg: NativeConfig) -> str:
    """config.h: this shim's values, every one a literal made by c_string."""
    triggers = redact_sh.sh_triggers(cfg.name, os.path.basename(cfg.target))
    prog, sets = compile_patterns(triggers)
    shells = b"".join(os.fsencode(s) + b"\0" for s in dict.fromkeys(["/bin/sh", *cfg.shells]))
    info = f"shim={cfg.name}\n".encode() + b"target=" + os.fsencode(cfg.target) + b"\n"
    lines = [
        "/* written by `mcpshim install --native` for this shim; see native.c */",
        f"#define NAME {c_string(cfg.name.encode())}",
        f"#define TARGET {c_string(os.fsencode(cfg.target))}",
        f"#define LOGDIR {c_string(os.fsencode(cfg.log_dir))}",
        f"#define INTERP {c_string(os.fsencode(cfg.interpreter))}",
        f"#define INTERP_BASH {1 if cfg.bash else 0}",
        f"#define ON_FAIL_REFUSE {1 if cfg.on_failure == 'refuse' else 0}",
        f"#define FALLBACK {c_string(os.fsencode(cfg.fallback))}",
        f"#define FALLBACK_CMD {c_string(os.fsencode(cfg.fallback_cmd()))}",
        f"#define SHELLS {c_string(shells, nul_ok=True)}",
        f"#define MARKER_INFO {c_string(info)}",
        f"#define TRIGGER_PROGRAM {c_string(prog, nul_ok=True)}",
        "static const unsigned char TRIGGER_SETS[] = {" + ",".join(str(b) for b in sets) + "};",
        "",
    ]
    return "\n".join(lines)


#: how else the same program can be started, for benchmarks/shim_overhead.py --options:
#: by glibc, linked statically or dynamically (hardened as a libc allows)
OPTIONS: dict[str, tuple[str, ...]] = {
    "static glibc": ("-std=gnu11", "-O2", "-DMCPSHIM_HOSTED", "-D_FORTIFY_SOURCE=2",
                     "-fstack-protector-strong", "-static", "-s"),
    "dynamic glibc": ("-std=gnu11", "-O2", "-DMCPSHIM_HOSTED", "-D_FORTIFY_SOURCE=2",
                      "-fstack-protector-strong", "-fPIE", "-pie", "-Wl,-z,now", "-s"),
}  # fmt: skip


def _flags() -> tuple[str, ...]:
    if platform.machine().lower() in ("x86_64", "amd64"):
        # no TLS without a libc: the guard is a global, set from AT_RANDOM at entry
        return (*_FLAGS, "-mstack-protector-guard=global")
    return _FLAGS


def source_digest(config: str, cc: Iterable[str]) -> str:
    """What the binary is built from: source, config, compiler command and flags."""
    h = hashlib.sha256(_template())
    for part in (config, "\0".join(cc), "\0".join(_flags())):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def _elf_machine(data: bytes) -> int | None:
    if len(data) < 20 or data[:4] != b"\x7fELF":
        return None
    return int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")


def build(
    config: str, cc: list[str], extra: tuple[str, ...] = (), flags: tuple[str, ...] | None = None
) -> bytes:
    """The binary for this config, built in a private temporary directory (`extra`: more
    compiler flags, for the tests' builds; `flags`: others in place of the shipped ones)."""
    with tempfile.TemporaryDirectory(prefix="mcpshim-native-") as tmp:
        d = Path(tmp)
        (d / "native.c").write_bytes(_template())
        (d / "config.h").write_text(config)
        out = d / "shim"
        try:
            done = subprocess.run(
                [*cc, *(_flags() if flags is None else flags), *extra, "-o", str(out), "native.c"],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                cwd=d,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise NativeUnavailable(f"{cc[0]} cannot be run: {exc}") from None
        if done.returncode != 0 or not out.is_file():
            err = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise NativeUnavailable(f"{shlex.join(cc)} failed: {err}")
        data = out.read_bytes()
    want = _MACHINES.get(platform.machine().lower())
    if _elf_machine(data) != want or NATIVE_MARKER not in data:
        raise NativeUnavailable(f"{shlex.join(cc)} built no {platform.machine()} ELF binary")
    return data
