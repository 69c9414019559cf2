"""Parley's A2A client against the official a2a-sdk servers (1.3 and 0.3.26)."""
