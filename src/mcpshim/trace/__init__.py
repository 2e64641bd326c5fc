"""`run --trace`: strace as the exec event source (strace argv, its output parser, the
records it yields, the file an exec of /proc/self/exe ran: selfexe) and the probe that
says whether tracing can work here.

May import: base, log, proc, shim.
"""
