"""Tamper evidence for the exec log: seal records that chain the log's bytes by hashes
(record), keyed by forward-secure keys from a root the user keeps (keys), the sealer's state
between runs (state), the sealing itself (sealer), anchors sent where the user cannot
rewrite them (anchors), and `log verify` (verify, ranges, view).

The shims never hash: sealing is a Python process reading what they appended.

May import: base, log.
"""
