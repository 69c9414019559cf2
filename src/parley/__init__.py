"""Parley: an Agent2Agent (A2A) platform — server, agents, client and CLI."""

__version__ = "0.1.0"

from parley.app import Parley

__all__ = ["Parley", "__version__"]
