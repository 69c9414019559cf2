"""Python functions as tools: ``@tool`` derives the JSON Schema from type hints and the docstring.

    @tool
    async def weather(city: str, unit: Literal["C", "F"] = "C") -> str:
        '''Current weather in a city.

        Args:
            city: The city name, e.g. "Paris".
            unit: Temperature unit.
        '''

The docstring's text before ``Args:`` describes the tool; the Google-style ``Args:``
section describes each parameter. Sync functions run in a worker thread; any
exception becomes a tool error the model sees as ``error: ...``.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import re
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, overload

from parley.agents.tools.base import Tool, ToolError

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class PythonTool(Tool):
    """A Python function (sync or async) offered to the model."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        self.description = description or summary or self.name
        self.parameters = function_schema(fn, arg_docs)
        self._is_async = inspect.iscoroutinefunction(fn)

    async def call(self, arguments: dict[str, Any]) -> Any:
        props = self.parameters.get("properties", {})
        unknown = sorted(set(arguments) - set(props))
        if unknown and not self.parameters.get("additionalProperties"):
            raise ToolError(f"unknown argument(s) {', '.join(unknown)}; this tool takes {', '.join(props) or 'none'}")
        missing = [p for p in self.parameters.get("required", []) if p not in arguments]
        if missing:
            raise ToolError(f"missing required argument(s) {', '.join(missing)}")
        if self._is_async:
            return await self.fn(**arguments)
        return await asyncio.to_thread(self.fn, **arguments)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The decorated function stays callable as before."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<PythonTool {self.name}>"


@overload
def tool(fn: Callable[..., Any], /) -> PythonTool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None) -> Callable[[Callable[..., Any]], PythonTool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None):
    """Make a function a tool: ``@tool`` or ``@tool(name=..., description=...)``."""
    if fn is not None:
        return PythonTool(fn, name=name, description=description)
    return lambda f: PythonTool(f, name=name, description=description)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section, current, indent = header.group(1).lower(), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("args", "arguments", "parameters") or not line.strip():
            continue
        level = len(line) - len(line.lstrip())
        match = _ARG.match(line)
        if match and (indent is None or level <= indent):
            indent, current = level, match.group(1)
            args[current] = match.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    text = "\n".join(summary).strip()
    return re.sub(r"\n\s*\n", "\n\n", text), args


def function_schema(fn: Callable[..., Any], docs: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON Schema (an object) of `fn`'s parameters."""
    docs = docs or {}
    try:
        hints = get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: schema without types
        hints = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    extra = False
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            continue
        schema = type_schema(hints.get(pname, Any))
        if pname in docs:
            schema["description"] = docs[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        elif _jsonable(param.default):
            schema["default"] = param.default.value if isinstance(param.default, enum.Enum) else param.default
        props[pname] = schema
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if extra:
        out["additionalProperties"] = True
    return out


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one Python type hint (best effort; unknown types accept anything)."""
    if tp is Any or tp is inspect.Parameter.empty:
        return {}
    if tp is type(None):
        return {"type": "null"}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp in simple:
        return {"type": simple[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum([m.value for m in tp])
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return _enum(list(args))
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return type_schema(options[0])
        return {"anyOf": [type_schema(a) for a in options]}
    if origin is typing.Annotated:
        return type_schema(args[0])
    if tp in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, abc.Sequence, abc.Iterable):
        schema: dict[str, Any] = {"type": "array"}
        if args and args[0] is not Ellipsis:
            schema["items"] = type_schema(args[0])
        return schema
    if tp is dict or origin is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = type_schema(args[1])
        return schema
    if typing.is_typeddict(tp):
        hints = get_type_hints(tp)
        return {"type": "object", "properties": {k: type_schema(v) for k, v in hints.items()},
                "required": sorted(getattr(tp, "__required_keys__", hints))}
    return {}


def _enum(values: list[Any]) -> dict[str, Any]:
    kinds = {type(v) for v in values}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if len(kinds) == 1 and next(iter(kinds)) in simple:
        return {"type": simple[next(iter(kinds))], "enum": values}
    return {"enum": values}


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, enum.Enum, list, dict))
