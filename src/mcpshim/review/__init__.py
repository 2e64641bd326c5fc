"""Review: findings and the rule registry, the rules (one small function per check), the
policy and baseline that tune them, and the streaming review pass over a log (engine, split
across processes for large logs).

May import: base, log, shim, family, contract.
"""
