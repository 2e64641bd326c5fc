"""`run --contain`: the kernel holds a server's family to what its lock approved (Landlock).

`landlock` is the kernel interface (ctypes syscalls: the ABI probe, a ruleset, restricting
the calling process); `seccomp` the filter that refuses MPTCP sockets, which Landlock's
port rules do not hold; `binfmt` reads what the kernel itself opens to run a program (an
ELF interpreter, a `#!` line); `shims` what the shims need executable, and rebuilds sh
shims as native ones where the lock did not approve their shell; `plan` turns a lock entry
into the rules (execute, write, connect, reading credential files: `reads`) and says what
they do not cover; `contained` builds the ruleset, starts the server inside it (fork,
restrict, exec) and tells the tracer which refusals were its own.

May import: base, log, contract, shim.
"""
