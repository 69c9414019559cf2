"""What `parley serve` serves: the built-in agents, or a user's app (`--app module:attr`)."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

import uvicorn

from parley.agents.builtin import builtin_agents
from parley.app import Parley
from parley.settings import DEFAULT_DB, MEMORY, Settings

if TYPE_CHECKING:
    from parley.agents.llm import AgentLoop


class DrainingServer(uvicorn.Server):
    """uvicorn, which on SIGTERM/SIGINT first tells the runtime (:meth:`Runtime.begin_stop`): /readyz turns 503,
    open streams end at once with a resume hint instead of holding the shutdown until they finish, and
    running tasks get `drain_seconds` to finish before they are handed over."""

    def __init__(self, config: uvicorn.Config, runtime: Any) -> None:
        super().__init__(config)
        self.runtime = runtime

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.runtime.begin_stop_threadsafe()
        super().handle_exit(sig, frame)


GC_THRESHOLDS = (10_000, 50, 100)


def tune_gc() -> None:
    """Tune CPython's cyclic garbage collector for a long-running server (docs/operations.md, "Performance").

    With the default thresholds (700, 10, 10) a busy server spent a third of its CPU in collections of the
    older generations, each a pause of 100-200 ms (bench/RESULTS.md): every request allocates hundreds of
    short-lived objects, and each gen-2 pass walks every object alive. What exists at start-up (modules,
    agents, settings) is frozen out of collections for good, and the young generation is collected every
    10,000 allocations instead of 700, so objects that die young are never promoted."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class ServeError(Exception):
    """A start-up problem to report in one line (bad --app, unwritable --db, ...)."""


def load_app(spec: str) -> Parley:
    """Import `module:attribute` and return the Parley app it names."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ServeError(f"--app must look like 'module:attribute', got {spec!r}")
    if os.getcwd() not in sys.path:  # like uvicorn: modules next to where the server starts
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ServeError(f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while it was imported: say where, in a line
        raise ServeError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}{_where(exc)}") from None
    app = getattr(module, attr, None)
    if not isinstance(app, Parley):
        raise ServeError(f"{spec!r} is not a parley.Parley instance")
    return app


def _where(exc: BaseException) -> str:
    """ ' (file.py, line N)': the innermost line of the user's code in the traceback (not Python's import
    machinery, not Parley's own checks)."""
    import traceback

    package = os.path.dirname(os.path.abspath(__file__))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen") and not os.path.abspath(f.filename).startswith(package)]
    return f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""


def default_app(db: str | None = DEFAULT_DB, *, settings: Settings | None = None) -> Parley:
    """The built-in agents (echo is the default) over the SQLite file `db`, or in memory when `db` is None."""
    settings = (settings or Settings()).merged(db=db or MEMORY)
    app = Parley(settings=settings)
    for agent in builtin_agents():
        app.add_agent(agent)
    assistant = assistant_agent()
    if assistant is not None:
        app.add_agent(assistant)
    return app


def assistant_agent(env: dict[str, str] | None = None) -> AgentLoop | None:
    """The built-in `assistant` (an LLM agent), only when PARLEY_LLM_BASE_URL is set, or PARLEY_LLM_PROVIDER is
    `fake` (the scripted model: it answers "You said: ...", no model server needed).

    Its key and model come from PARLEY_LLM_API_KEY and PARLEY_LLM_MODEL.
    """
    env = dict(os.environ) if env is None else env
    fake = env.get("PARLEY_LLM_PROVIDER") == "fake"
    if not env.get("PARLEY_LLM_BASE_URL") and not fake:
        return None
    from parley.agents.llm import FakeBackend, LLMAgent, OpenAICompatBackend

    backend = FakeBackend(model=env.get("PARLEY_LLM_MODEL")) if fake else OpenAICompatBackend(env=env)
    model = backend.model or "the configured model"
    return LLMAgent(
        id="assistant",
        name="Assistant",
        description=f"A general-purpose assistant answered by an LLM ({model}).",
        skills=[{"id": "chat", "name": "Chat", "description": "Answers questions and helps with tasks.",
                 "tags": ["llm", "chat"], "examples": ["Explain the A2A protocol in two sentences."]}],
        backend=backend,
        system_prompt="You are a helpful, concise assistant.",
    )
