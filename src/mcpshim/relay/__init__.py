"""relay."""
