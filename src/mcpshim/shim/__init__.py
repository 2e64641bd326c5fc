"""The shims: rendering the POSIX sh scripts (the sources live in the top-level `shims/`),
installing and listing them, the manifest that owns them, the registry of every shim
directory installed into, and the trusted search path their targets are pinned from.

May import: base, log.
"""
