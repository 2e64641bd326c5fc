"""Tests of mcpshim's family package."""
