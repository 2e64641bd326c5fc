"""Tests of mcpshim's contract package."""
