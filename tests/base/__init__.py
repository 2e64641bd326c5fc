"""Tests of mcpshim's base package."""
