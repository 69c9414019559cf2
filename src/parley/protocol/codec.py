"""Encoding and validated decoding of the canonical model (sans-IO).

`to_wire` turns a struct into plain JSON-ready data (the A2A 1.0 shape);
`from_wire` validates plain data into a struct (reading proto field names too, for
A2A 1.0's ProtoJSON) and turns validation failures into :class:`InvalidParamsError`
with the path of the offending field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import accumulate, count
from operator import sub
from typing import Any, TypeVar

import msgspec

from parley.protocol.errors import InvalidParamsError, InvalidRequestError, ParseError
from parley.protocol.names import accept_proto_names

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()

# How deeply a JSON body may nest (arrays and objects), unless the caller says otherwise:
# `LimitSettings.max_json_depth`. Deeper bodies are refused before they are parsed, so neither
# msgspec nor any code walking the data later can run out of stack (RecursionError).
DEFAULT_MAX_JSON_DEPTH = 64
_max_depth: ContextVar[int] = ContextVar("parley_max_json_depth", default=DEFAULT_MAX_JSON_DEPTH)

# A JSON string (escapes included), removed before brackets are counted. It always matches from a
# quote (an unterminated string runs to the end, a backslash may end the body), so the regex never
# fails after a long scan and re-scans from a later quote: linear time on any input (no ReDoS).
_STRING = re.compile(rb'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
# `[` and `{` -> 2, `]` and `}` -> 0: the running sum minus the count so far is the depth.
_STEP = bytes.maketrans(_BRACKETS, b"\x02\x00\x02\x00")


def to_wire(obj: Any) -> Any:
    """Struct (or containers of structs) -> JSON-ready builtins, 1.0 shape."""
    return msgspec.to_builtins(obj)


def from_wire(data: Any, cls: type[T], *, what: str = "params", proto_names: bool = False) -> T:
    """Validate plain data into `cls`; raise InvalidParamsError on failure.

    With `proto_names` (A2A 1.0 JSON, which is ProtoJSON), the proto name of a field is read like its
    JSON name, in `cls` and every struct nested in it (:mod:`parley.protocol.names`).
    """
    if proto_names:
        data = accept_proto_names(data, cls, what)
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise InvalidParamsError(f"Invalid {what}: {_describe(exc)}") from None


def _describe(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    # msgspec says `$...`; name the root so the message reads well.
    return text.replace("`$.", "`params.").replace("`$`", "`params`").replace("`$[", "`params[")


def dumps(obj: Any) -> bytes:
    """Serialise builtins or structs to compact JSON bytes."""
    return _encoder.encode(obj)


def loads(body: bytes | str, *, max_depth: int | None = None) -> Any:
    """Parse JSON; raise ParseError with the position of the problem.

    Bodies nested deeper than `max_depth` (default: the limit of the current context, see
    :func:`json_depth_limit`, else DEFAULT_MAX_JSON_DEPTH) are refused with InvalidRequestError
    before they are parsed; invalid UTF-8 inside a string and numbers out of range are ParseErrors.
    """
    limit = _max_depth.get() if max_depth is None else max_depth
    depth = json_depth(body, limit)
    if depth > limit:
        raise InvalidRequestError(
            f"Invalid request: the JSON body nests arrays and objects deeper than the limit of {limit} levels"
        )
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:  # ValidationError ("Number out of range") included
        raise ParseError(f"Parse error: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec checks UTF-8 inside strings with Python's codec
        raise ParseError(f"Parse error: a string is not valid UTF-8 ({exc.reason})") from None
    except RecursionError:  # only with a limit above what the stack allows; never with the default
        raise InvalidRequestError("Invalid request: the JSON body nests arrays and objects too deeply") from None


def json_depth(body: bytes | str, limit: int = 0) -> int:
    """How deeply `body` nests arrays and objects (brackets inside strings do not count), exactly when
    that is more than `limit`; otherwise a number no larger than `limit`.

    Cheap for small bodies: a body with no more than `limit` opening brackets cannot nest deeper,
    and is not looked at further. Linear in the size of the body otherwise (C-speed passes).
    Malformed JSON gets a number too (the parser refuses it afterwards).
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    opens = raw.count(b"[") + raw.count(b"{")
    if opens <= limit:
        return opens
    if b'"' in raw:
        raw = _STRING.sub(b"", raw)
    steps = raw.translate(_STEP, _NOT_BRACKETS)
    if not steps:
        return 0
    return max(max(map(sub, accumulate(steps), count(1))), 0)


@contextmanager
def json_depth_limit(limit: int) -> Iterator[None]:
    """Within the block, :func:`loads` refuses JSON nested deeper than `limit` (the bindings set
    `LimitSettings.max_json_depth` around parsing a request; the limit is per context: per request)."""
    token = _max_depth.set(limit)
    try:
        yield
    finally:
        _max_depth.reset(token)


def copy(obj: T) -> T:
    """A deep copy of a struct tree (structs are mutable)."""
    return msgspec.convert(msgspec.to_builtins(obj), type(obj))


def invalid(path: str, why: str) -> InvalidParamsError:
    """An InvalidParamsError naming the offending field, like msgspec's own messages."""
    return InvalidParamsError(f"Invalid params: {why} - at `{path}`")


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def expect_object(value: Any, path: str) -> dict[str, Any]:
    """`value` if it is a JSON object, else InvalidParamsError at `path`."""
    if not isinstance(value, dict):
        raise invalid(path, f"expected an object, got {json_type(value)}")
    return value
