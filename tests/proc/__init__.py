"""Tests of mcpshim's proc package."""
