"""proc."""
