"""Whole-product runs: the README's commands, a client config end to end, the smoke test."""
