"""pathcheck."""
