"""The ruleset of a plan, the server started inside it, and which refusals were its own.

The ruleset is built here, in the supervisor, before the server starts: every rule's file
is opened and checked now. posix_spawn has no hook between its fork and its exec, and a
fork of the supervisor (tens of MiB of Python) cost 8 ms here where posix_spawn's vfork
costs 0.7; but a Landlock domain, like no_new_privs, belongs to the thread that asked for
it and is inherited by what that thread starts. So a short-lived thread restricts itself
and calls posix_spawn: the server starts in the domain with the spawn's own file actions
(the relay's pipes onto stdin and stdout), process group and signal defaults, and the
thread ends. Where the lock's ports are held, the same thread installs the seccomp filter
that refuses MPTCP sockets (sandbox.seccomp) before it spawns: a filter, too, is the
thread's and is inherited. Everything the family does from then on is held by the kernel;
strace, when tracing, is that exec and runs inside the domain (a tracer may trace its own
domain; the relay, recorder and sealer are started before and stay outside).

`exec_refused` and `connect_refused` tell the tracer, at the session's end, which EACCES
it recorded were this ruleset's: the file the exec named is not one it allowed (or a file
the kernel opens to run it is not), the port is not one the lock lists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from mcpshim.contract.lockfile import ServerApproval
from mcpshim.errors import McpshimError
from mcpshim.log.filetable import FileTable
from mcpshim.paths import Locations
from mcpshim.sandbox import landlock, seccomp
from mcpshim.sandbox.binfmt import started_by
from mcpshim.sandbox.plan import DEVICES, Plan, approved_files, approved_reads, make_plan
from mcpshim.sandbox.reads import beneath_any, read_rules, refused_reads
from mcpshim.sandbox.shims import shim_needs
from mcpshim.shim.manifest import load_manifest

__all__ = ["ContainError", "Containment", "build"]


class ContainError(McpshimError):
    """The ruleset could not be built or applied: the server is not started."""


class Containment:
    """One session's ruleset (built at once) and its plan."""

    def __init__(self, plan: Plan, abi: int) -> None:
        self.plan, self.abi = plan, abi
        write = landlock.write_rights(abi) if plan.write is not None else 0
        refer = landlock.REFER if abi >= 2 else 0
        net = landlock.CONNECT_TCP if plan.connect is not None else 0
        read = landlock.READ_FILE if plan.read else 0
        self._inodes: set[tuple[int, int]] = set()
        try:
            self.ruleset = landlock.Ruleset(landlock.EXECUTE | write | refer | read, net)
        except OSError as exc:
            why = exc.strerror
            raise ContainError(f"--contain: cannot create a Landlock ruleset: {why}") from None
        try:
            self._rules(plan, write, refer)
        except BaseException:
            self.ruleset.close()
            raise

    def _rules(self, plan: Plan, write: int, refer: int) -> None:
        for a in plan.execute:
            try:
                st = os.stat(a.path)
                self.ruleset.allow_path(a.path, landlock.EXECUTE)
            except OSError as exc:
                raise ContainError(f"--contain: {a.path} ({a.why}): {exc.strerror}") from None
            self._inodes.add((st.st_dev, st.st_ino))
        if refer:
            # Without this every ruleset (ABI 2+) refuses to rename or link a file into
            # another directory (EXDEV); the other rights still decide whether it may.
            self.ruleset.allow_path("/", refer)
        for d in plan.write or ():
            try:
                self.ruleset.allow_path(d, write)
            except OSError as exc:
                raise ContainError(f"--contain-write {d}: {exc.strerror}") from None
        if plan.write is not None:
            for dev in DEVICES:
                with contextlib.suppress(OSError):  # a container may lack /dev/tty
                    self.ruleset.allow_path(dev, landlock.FILE_WRITE)
        for port in plan.connect or ():
            self.ruleset.allow_port(port)
        for path in read_rules(plan.read) if plan.read else ():
            with contextlib.suppress(OSError):  # gone since it was listed: nothing to read
                self.ruleset.allow_path(path, landlock.READ_FILE)

    def allows(self, path: str) -> bool:
        """Whether the file at `path` is one the ruleset lets the family execute."""
        try:
            st = os.stat(path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in self._inodes

    def payload(self) -> dict[str, Any]:
        return self.plan.payload(self.abi)

    # -- the child ------------------------------------------------------------------------

    def spawn(
        self,
        path: str,
        argv: Sequence[str],
        env: dict[str, str],
        file_actions: Sequence[tuple[Any, ...]] = (),
        setsigdef: Sequence[int] = (signal.SIGPIPE, signal.SIGXFSZ),
    ) -> int:
        """posix_spawn(path, argv, env, file_actions, setpgroup=0, setsigdef), from a thread
        of its own that restricts itself first: the child inherits the thread's domain (a
        Landlock domain and no_new_privs are the calling thread's, not the process's), the
        supervisor's other threads stay free, and nothing is forked but by vfork. OSError
        for an exec that failed (as posix_spawn raises it); ContainError when the ruleset
        could not be applied."""
        done: list[int | BaseException] = []

        def restricted() -> None:
            try:
                landlock.enforce(self.ruleset.fd)
                if self.plan.connect is not None:  # ports held: MPTCP too (sandbox.seccomp)
                    seccomp.install_no_mptcp()
            except OSError as exc:
                done.append(
                    ContainError(
                        f"--contain: the server could not be restricted ({exc.strerror}); "
                        "it was not started"
                    )
                )
                return
            try:
                done.append(os.posix_spawn(path, list(argv), env, file_actions=list(file_actions),
                                           setpgroup=0, setsigdef=setsigdef))  # fmt: skip
            except BaseException as exc:  # an OSError of the exec, or anything: raised below
                done.append(exc)

        # The thread ends here: nothing else ever runs restricted in this process.
        thread = threading.Thread(target=restricted, name="mcpshim-contain", daemon=True)
        thread.start()
        thread.join()
        self.ruleset.close()
        if isinstance(done[0], BaseException):
            raise done[0]
        return done[0]

    # -- what the tracer recorded ---------------------------------------------------------

    def exec_refused(self, filename: bytes, cwd: bytes | None, result: str) -> str | None:
        """Why the ruleset refused this traced exec attempt, or None if it did not (an
        EACCES it would have met anyway: no execute permission, a noexec mount)."""
        if result != "EACCES":
            return None
        if not filename.startswith(b"/"):
            if cwd is None:
                return None
            filename = os.path.join(cwd, filename)
        path = os.fsdecode(filename)
        if not os.path.exists(path):
            return "not an executable the lock approved (it is gone now)"
        if not os.access(path, os.X_OK):
            return None
        if not self.allows(path):
            return "not an executable the lock approved"
        for extra, _why in started_by(path):
            if not self.allows(extra):
                return f"it needs {extra}, which the lock did not approve"
        return None

    def tracer_hooks(
        self,
    ) -> tuple[
        Callable[[bytes, bytes | None, str], str | None],
        Callable[[int, str], str | None] | None,
        Callable[[bytes], str | None] | None,
        Callable[[bytes, str], str | None] | None,
    ]:
        """What the tracer asks about its records (trace.run.TraceRun.contained): which
        exec attempts were refused, and where ports, writes or reads are held, which
        connects were refused, which metadata changes were outside the write directories
        and which credential files were refused."""
        ports = self.connect_refused if self.plan.connect is not None else None
        write = self.write_outside if self.plan.write is not None else None
        return self.exec_refused, ports, write, self.read_refused if self.plan.read else None

    def read_refused(self, path: bytes, result: str) -> str | None:
        """Why the ruleset refused opening this credential file, or None if it did not."""
        if result != "EACCES" or not self.plan.read:
            return None
        name = os.path.realpath(os.fsdecode(path))
        if beneath_any(name, self.plan.read) or beneath_any(os.fsdecode(path), self.plan.read):
            return "a credential file the lock does not list"
        return None

    def write_outside(self, path: bytes) -> str | None:
        """Why a file at `path` is outside the write directories (where a metadata change
        is one Landlock let through), or None when it is beneath one of them."""
        if self.plan.write is None:
            return None
        name = os.path.realpath(os.fsdecode(path))
        for d in (*self.plan.write, *DEVICES):
            if name == d or name.startswith(d.rstrip("/") + "/"):
                return None
        return "outside the --contain-write directories (Landlock does not refuse it)"

    def connect_refused(self, port: int, result: str) -> str | None:
        """Why the ruleset refused this traced TCP connect, or None if it did not."""
        if result != "EACCES" or self.plan.connect is None or port in self.plan.connect:
            return None
        return f"TCP port {port} is not a port of the destinations the lock lists"


def build(
    server: ServerApproval,
    lock: str,
    abi: int,
    loc: Locations,
    tracer: str | None,
    child_path: str,
    write: Sequence[str] | None,
    command: str,
    files: FileTable | None = None,
) -> Containment:
    """The containment of `server`'s family (the shims of `loc`, the tracer's strace, the
    child's PATH for `#!/usr/bin/env` scripts); ContainError when the server's own program
    (`command`, as the supervisor will find it) is not one the lock approved. The shims
    get no shell the lock did not approve where native ones can be built (sandbox.shims:
    sh shims are rebuilt here). `files`: the session's table of locations, whose
    credential files here the lock does not list are refused reading (sandbox.reads)."""
    needs = shim_needs(loc, approved_files(server)[0])
    manifest = load_manifest(loc.shim_dir)
    names = manifest.shims if manifest is not None else {}
    log_dir = str(loc.log_dir.resolve())
    read: tuple[str, ...] = ()
    if files is not None:
        here = (p for p, _place in files.credential_files(workspace=False))
        work = (files.roots.workspace,) if files.roots.workspace else ()
        read = refused_reads(here, approved_reads(server), work)
    plan = make_plan(server, lock, abi, needs.files, tracer, child_path, write, log_dir,
                     needs.interpreter, needs.notes, read)  # fmt: skip
    containment = Containment(plan, abi)
    found = command if "/" in command else shutil.which(command, path=child_path)
    if found is None:
        return containment  # the supervisor says "command not found" (127) as ever
    shims = {str(loc.shim_dir / n): n for n in names}
    runs = names[shims[found]].target if found in shims else found  # a shim execs its target
    if not containment.allows(runs):
        containment.ruleset.close()
        raise ContainError(
            f"--contain: the server's program {runs} is not one {lock} approved "
            f"for {server.name} (approve a session of this command first: mcpshim approve)"
        )
    return containment
