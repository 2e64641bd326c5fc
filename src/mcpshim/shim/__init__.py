"""shim."""
