"""Encoding and validated decoding of the canonical model (sans-IO).

`to_wire` turns a struct into plain JSON-ready data (the A2A 1.0 shape);
`from_wire` validates plain data into a struct and turns validation failures
into :class:`InvalidParamsError` with the path of the offending field.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from parley.protocol.errors import InvalidParamsError, ParseError

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


def to_wire(obj: Any) -> Any:
    """Struct (or containers of structs) -> JSON-ready builtins, 1.0 shape."""
    return msgspec.to_builtins(obj)


def from_wire(data: Any, cls: type[T], *, what: str = "params") -> T:
    """Validate plain data into `cls`; raise InvalidParamsError on failure."""
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


def loads(body: bytes | str) -> Any:
    """Parse JSON; raise ParseError with the position of the problem."""
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise ParseError(f"Parse error: {exc}") from None


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
