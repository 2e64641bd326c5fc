"""Tests of mcpshim's pathcheck package."""
