"""Agents: the contract, and the built-in agents."""

from parley.agents.base import Agent, ArtifactChunk, FunctionAgent, InternalEvent, RunContext, Status

__all__ = ["Agent", "ArtifactChunk", "FunctionAgent", "InternalEvent", "RunContext", "Status"]
