"""The project itself: its layout and imports."""
