"""Tests of mcpshim's shim package."""
