"""Review rules (MCS1xx and the session, trace and MCP rules): one small module per concern,
each rule defined beside the function that finds it; review.catalogue lists the modules.

May import: base, log, shim, family, contract (as review).
"""
