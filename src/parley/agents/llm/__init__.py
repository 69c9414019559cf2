"""LLM agents: the agent loop, model backends (pluggable), and the conversation state."""

from parley.agents.llm.backend import (
    ChatRequest,
    Finish,
    LLMBackend,
    LLMError,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from parley.agents.llm.fake import FakeBackend
from parley.agents.llm.loop import AgentLoop, Limits, LLMAgent
from parley.agents.llm.openai_compat import OpenAICompatBackend
from parley.agents.llm.registry import create_backend, register_backend
from parley.agents.llm.state import Conversation

__all__ = [
    "AgentLoop",
    "ChatRequest",
    "Conversation",
    "FakeBackend",
    "Finish",
    "LLMAgent",
    "LLMBackend",
    "LLMError",
    "Limits",
    "OpenAICompatBackend",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "create_backend",
    "register_backend",
]
