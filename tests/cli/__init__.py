"""Tests of mcpshim's cli package."""
