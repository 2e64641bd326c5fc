"""Tests of mcpshim's log package."""
