"""Client-side errors that are not A2A errors (network, HTTP, malformed answers)."""

from __future__ import annotations


class ClientError(Exception):
    """The server could not be reached or did not answer like an A2A server."""
