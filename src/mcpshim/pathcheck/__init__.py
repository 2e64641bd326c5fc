"""PATH and client configs: facts about a PATH and its rules (MCS2xx), the launch lint of a
configured server, MCP client config files (JSON with comments), and wrap-config, which puts
a client's servers under `mcpshim run` with the PATH their client would pass.

May import: base, log, shim, review.
"""
