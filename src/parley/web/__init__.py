"""The web dashboard."""
