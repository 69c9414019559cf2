"""ProtoJSON field names on input: the proto name of a field is read like its JSON name.

A2A 1.0 JSON is the ProtoJSON of `lf.a2a.v1` (section 5.5): it is written with
lowerCamel names (`contextId`), and ProtoJSON parsers also accept the proto
field names (`context_id`). The canonical model's Python field names *are* the
proto names (`rename="camel"` derives the JSON ones), so one rule covers every
field of every request: :func:`accept_proto_names` renames proto names to JSON
names, in the struct and in the structs nested in it, before
:func:`parley.protocol.codec.from_wire` validates. An object that spells one
field both ways is refused (InvalidParamsError naming both). Free-form members
(`metadata`, a data part's `data`) are not structs and are left as they are.

The plan of each struct (its renames, and which members hold nested structs) is
built once from `msgspec.inspect` and cached.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec.inspect as mi

from parley.protocol.errors import InvalidParamsError

# value, path -> the value with proto names renamed (the same object when nothing changed)
Walk = Callable[[Any, str], Any]

_UPPER = re.compile(r"(?<!^)([A-Z])")


def proto_name(json_name: str) -> str:
    """The proto (snake_case) name of a lowerCamel JSON name: `contextId` -> `context_id`."""
    return _UPPER.sub(r"_\1", json_name).lower()


@dataclass(slots=True)
class _Plan:
    """How to rename one struct's members: proto name -> JSON name, and the walkers of nested structs."""

    renames: dict[str, str] = field(default_factory=dict)
    nested: dict[str, Walk] = field(default_factory=dict)


def accept_proto_names(data: Any, cls: type, root: str = "params") -> Any:
    """`data` (plain JSON data for `cls`) with every proto field name renamed to its JSON name.

    Copy on write: `data` itself is never changed. Raises InvalidParamsError when one object
    carries a field under both names.
    """
    return _struct_walker(cls)(data, root)


@functools.cache
def _struct_walker(cls: type) -> Walk:
    plan = _Plan()
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    for f in info.fields:
        if f.name != f.encode_name:
            plan.renames[f.name] = f.encode_name
        child = _walker(f.type)
        if child is not None:
            plan.nested[f.encode_name] = child
    return functools.partial(_walk_object, plan)


def _walker(t: mi.Type) -> Walk | None:
    """The walker for a value of type `t`, or None when no struct can be inside it."""
    if isinstance(t, mi.StructType):
        return _struct_walker(t.cls)
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        item = _walker(t.item_type)
        return None if item is None else functools.partial(_walk_list, item)
    if isinstance(t, mi.DictType):
        value = _walker(t.value_type)
        return None if value is None else functools.partial(_walk_dict_values, value)
    if isinstance(t, mi.UnionType):
        walkers = [w for w in map(_walker, t.types) if w is not None]
        return walkers[0] if len(walkers) == 1 else None  # several structs: which one is not known here
    return None


def _walk_object(plan: _Plan, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        return value  # validation names the wrong type afterwards
    out: dict[str, Any] | None = None
    for proto, json_name in plan.renames.items():
        if proto in value:
            if json_name in value:
                raise InvalidParamsError(
                    f"Invalid params: `{path}.{json_name}` and `{path}.{proto}` are the JSON name and the proto name "
                    f"of one field; send it once"
                )
            if out is None:
                out = dict(value)
            out[json_name] = out.pop(proto)
    current = value if out is None else out
    for json_name, walk in plan.nested.items():
        member = current.get(json_name)
        if member is None:
            continue
        renamed = walk(member, f"{path}.{json_name}")
        if renamed is not member:
            if out is None:
                out = current = dict(value)
            out[json_name] = renamed
    return current


def _walk_list(item: Walk, value: Any, path: str) -> Any:
    if not isinstance(value, list):
        return value
    out: list[Any] | None = None
    for i, member in enumerate(value):
        renamed = item(member, f"{path}[{i}]")
        if renamed is not member:
            if out is None:
                out = list(value)
            out[i] = renamed
    return value if out is None else out


def _walk_dict_values(item: Walk, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] | None = None
    for key, member in value.items():
        renamed = item(member, f"{path}.{key}")
        if renamed is not member:
            if out is None:
                out = dict(value)
            out[key] = renamed
    return value if out is None else out


def typed_fields(*classes: type) -> tuple[set[str], set[str]]:
    """The names (JSON and proto) of the integer and of the boolean members of `classes`: how to type
    query parameters, which arrive as strings."""
    ints: set[str] = set()
    bools: set[str] = set()
    for cls in classes:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        for f in info.fields:
            kinds = f.type.types if isinstance(f.type, mi.UnionType) else (f.type,)
            if any(isinstance(k, mi.IntType) for k in kinds):
                ints.update({f.name, f.encode_name})
            elif any(isinstance(k, mi.BoolType) for k in kinds):
                bools.update({f.name, f.encode_name})
    return ints, bools


__all__ = ["accept_proto_names", "proto_name", "typed_fields"]
