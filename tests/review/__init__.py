"""Tests of mcpshim's review package."""
