"""Tests of mcpshim's relay package."""
