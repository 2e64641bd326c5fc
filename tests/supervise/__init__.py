"""Tests of mcpshim's supervise package."""
