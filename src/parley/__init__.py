"""Parley: an Agent2Agent (A2A) platform — server, agents, client and CLI."""

__version__ = "0.1.0"

from parley.agents.base import AgentError
from parley.app import Parley

__all__ = ["AgentError", "Parley", "__version__"]
