"""Tests of mcpshim's render package."""
