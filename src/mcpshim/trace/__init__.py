"""`run --trace`: strace as the exec event source (strace argv, its output parser, the
records it yields) and the probe that says whether tracing can work here.

May import: base, log, proc, shim.
"""
