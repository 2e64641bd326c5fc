"""mcpshim: make the whole execution family of a local MCP server visible and reviewable."""

__version__ = "0.1.0"
__all__ = ["__version__"]
