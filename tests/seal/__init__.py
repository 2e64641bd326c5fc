"""Tests of mcpshim's seal package."""
