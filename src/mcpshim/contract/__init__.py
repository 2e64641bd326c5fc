"""Tool contracts and their approval: the canonical form and hash of what an MCP server says
about itself (canon), the `mcpshim.lock` file that pins it together with what each tool was
seen to do (lockfile), and the identity of an executable: its content hash and who vouches
for it (identity), remembered between commands for package-owned files (identitycache).

The relay hashes definitions as it records them, the enforcing relay compares them with the
lock, review reports departures from it: all three import the one canonical form here, so
they agree on what "the same definition" means.

May import: base, log, shim.
"""
