"""Tests of mcpshim's otel package."""
