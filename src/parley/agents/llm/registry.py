"""The registry of LLM backends: the built-in OpenAI-compatible one, registered ones, and plug-ins.

Plug-ins are found through the `parley.llm_backends` entry-point group:
`name = "package.module:Factory"`, where `Factory(**options)` returns an
:class:`~parley.agents.llm.backend.LLMBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from parley.agents.llm.backend import LLMBackend
from parley.agents.llm.fake import FakeBackend
from parley.agents.llm.openai_compat import OpenAICompatBackend

ENTRY_POINT_GROUP = "parley.llm_backends"

BackendFactory = Callable[..., LLMBackend]
_registry: dict[str, BackendFactory] = {"openai": OpenAICompatBackend, "fake": FakeBackend}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make `factory(**options)` available as provider `name`."""
    _registry[name] = factory


def backend_factory(name: str) -> BackendFactory:
    """The factory of provider `name`: built-in, registered, or from the entry-point group."""
    if name in _registry:
        return _registry[name]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory = ep.load()
            _registry[name] = factory
            return factory
    known = sorted({*_registry, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
    raise LookupError(f"no LLM backend named {name!r}; known: {', '.join(known) or 'none'}")


def create_backend(provider: str = "openai", **options: Any) -> LLMBackend:
    """Build a backend of `provider` with `options` (e.g. base_url, api_key, model)."""
    return backend_factory(provider)(**options)
