"""Tests of mcpshim's trace package."""
