"""Tests of mcpshim's sandbox package (run --contain: Landlock)."""
