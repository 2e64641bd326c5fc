"""`mcpshim run`: the supervisor that holds a server's family for a session (session ids,
start and end records, the sampler of descendants no shim saw, containment at exit,
snapshots), and its MCP variant that puts the relay in front of the server.

May import: base, log, proc, shim, trace, relay, contract, sandbox.
"""
