"""The shims: rendering the POSIX sh scripts (the sources live in the top-level `shims/`),
installing and listing them, the manifest that owns them, the registry of every shim
directory installed into, the trusted search path their targets are pinned from, and a
shim directory with the log it is pinned to found on os alone (rundirs).

May import: base, log.
"""
