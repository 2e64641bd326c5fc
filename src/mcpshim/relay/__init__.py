"""`run --mcp`: the stdio relay between client and server (bytes through unchanged), its
forked pump child on Linux, splice/tee pipe I/O, and the recorder that files each JSON-RPC
call and response, redacted, in the log.

May import: base, log, proc, contract.
"""
