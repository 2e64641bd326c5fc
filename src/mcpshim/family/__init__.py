"""Execution families rebuilt from the log: process images, the forest keyed by (boot id, pid,
start time), trace records merged with shim records, a session's MCP calls, the attribution
of processes to MCP tool calls, and the one-line views of an image that evidence uses.

May import: base, log.
"""
