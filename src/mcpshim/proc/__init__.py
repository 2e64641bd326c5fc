"""Facts about live processes read from /proc and psutil: stat fields, start ticks (the
half of a process identity the pid lacks), command lines, sockets, inherited credential
names. Shared by the tracer and the supervisor, which must not import each other.

May import: base, log.
"""
