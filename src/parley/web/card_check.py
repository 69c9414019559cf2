"""The dashboard's card check: an agent's card as a 1.0 client and as a 0.3 client get it, each checked
against that version's schema.

1.0: the normative schema is `a2a.proto` (A2A 1.0 section 4.4.1, AgentCard). With the grpc extra the card's
JSON is parsed by protobuf's ProtoJSON parser into the generated `lf.a2a.v1.AgentCard` (unknown fields and
wrong types fail) and every field the proto marks `REQUIRED` (google.api.field_behavior) is checked, at any
depth. Without it, Parley's own model of the same message decodes it (types and required fields).

Signature: the card as served (A2A 1.0 §8.4) checked against the server's own card keys.

0.3: the card a client without `A2A-Version` gets (url, preferredTransport, protocolVersion added), checked
against the `required` lists and types of the 0.3 JSON schema (`specification/json/a2a.json`, AgentCard,
AgentSkill, AgentInterface, AgentCapabilities).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from parley.protocol import models as m
from parley.protocol.codec import from_wire
from parley.protocol.errors import A2AError

BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")

# specification/json/a2a.json (A2A 0.3): required properties and their JSON types
V03_CARD_REQUIRED = {"capabilities": dict, "defaultInputModes": list, "defaultOutputModes": list,
                     "description": str, "name": str, "protocolVersion": str, "skills": list, "url": str,
                     "version": str}
V03_SKILL_REQUIRED = {"description": str, "id": str, "name": str, "tags": list}
V03_INTERFACE_REQUIRED = {"transport": str, "url": str}
V03_OPTIONAL_TYPES = {"preferredTransport": str, "additionalInterfaces": list, "securitySchemes": dict,
                      "security": list, "supportsAuthenticatedExtendedCard": bool, "documentationUrl": str,
                      "iconUrl": str, "provider": dict, "signatures": list}


@dataclass(frozen=True, slots=True)
class Check:
    """One statement about a card, and whether it holds."""

    ok: bool
    what: str


def check_v1(card: dict[str, Any], *, strict: bool = True) -> list[Check]:
    """The 1.0 card (its JSON) against a2a.proto's AgentCard, then the URLs and bindings it declares.
    `strict`: a field a2a.proto does not have fails (Parley's own cards); else one at the top level is ignored
    and named (A2A 1.0 section 5.7: unrecognized fields SHOULD be ignored; the inspector, where a card may also
    serve 0.3 clients), deeper ones still fail."""
    checks = proto_checks(card, "AgentCard", strict=strict)
    if checks is None:
        try:
            from_wire(card, m.AgentCard, what="card")
            checks = [Check(True, "decodes as an A2A 1.0 AgentCard (Parley's model; install the grpc extra "
                                  "for the a2a.proto check)")]
        except A2AError as exc:
            checks = [Check(False, f"does not decode as an A2A 1.0 AgentCard: {exc.message}")]
    interfaces = card.get("supportedInterfaces") or []
    for i, interface in enumerate(interfaces if isinstance(interfaces, list) else []):
        checks.extend(_interface_checks(f"supportedInterfaces[{i}]", interface))
    return checks


def check_v03(card: dict[str, Any]) -> list[Check]:
    """The 0.3 view of a card against the 0.3 JSON schema's required properties and types."""
    checks = _required(card, V03_CARD_REQUIRED, "card")
    for name, kind in V03_OPTIONAL_TYPES.items():
        if name in card and not isinstance(card[name], kind):
            checks.append(Check(False, f"`{name}` must be {_json_type(kind)}"))
    for i, skill in enumerate(_list(card.get("skills"))):
        checks.extend(c for c in _required(skill, V03_SKILL_REQUIRED, f"skills[{i}]") if not c.ok)
    for i, interface in enumerate(_list(card.get("additionalInterfaces"))):
        checks.extend(c for c in _required(interface, V03_INTERFACE_REQUIRED, f"additionalInterfaces[{i}]")
                      if not c.ok)
    if isinstance(card.get("url"), str):
        checks.append(_absolute("url", card["url"]))
    transport = card.get("preferredTransport", "JSONRPC")
    checks.append(Check(transport in BINDINGS, f"preferredTransport {transport!r} is one of {', '.join(BINDINGS)}"))
    return checks


def proto_checks(data: Any, name: str, *, strict: bool = True) -> list[Check] | None:
    """`data` (JSON) as the a2a.proto message `name`: ProtoJSON parse, REQUIRED fields and each `payload` oneof
    set; None when protobuf (the grpc extra) is not installed. The card check and the inspector's response
    check (parley.web.response_check) both stand on it."""
    try:
        from google.api import field_behavior_pb2
        from google.protobuf import json_format

        from parley.grpc import a2a_pb2
    except ImportError:
        return None
    message = getattr(a2a_pb2, name)()
    if not isinstance(data, dict):
        return [Check(False, f"is not a JSON object, so not an lf.a2a.v1.{name}")]
    known = {n for f in message.DESCRIPTOR.fields for n in (f.name, f.json_name)}
    unknown = [] if strict else sorted(k for k in data if k not in known)
    try:  # not ignore_unknown_fields: that would also let an unknown enum value through
        json_format.ParseDict({k: v for k, v in data.items() if k not in unknown}, message)
    except json_format.ParseError as exc:
        return [Check(False, f"does not parse as lf.a2a.v1.{name} (a2a.proto): {exc}")]
    missing = _missing_required(message, field_behavior_pb2, "")
    checks = [Check(True, f"parses as lf.a2a.v1.{name} (a2a.proto, ProtoJSON)")]
    if unknown:
        checks.append(Check(True, "top-level fields a2a.proto does not have, ignored (A2A 1.0 section 5.7): "
                                  + ", ".join(f"`{k}`" for k in unknown)))
    if missing:
        checks += [Check(False, f"REQUIRED field `{path}` is missing or empty") for path in missing]
    else:
        checks.append(Check(True, "every field a2a.proto marks REQUIRED is present"))
    for oneof in message.DESCRIPTOR.oneofs:
        if oneof.name == "payload":  # SendMessageResponse, StreamResponse: one of task, message, updates
            chosen = message.WhichOneof(oneof.name)
            choices = ", ".join(f.json_name for f in oneof.fields)
            checks.append(Check(chosen is not None, f"exactly one of {choices} is set"
                                + (f" (`{message.DESCRIPTOR.fields_by_name[chosen].json_name}`)" if chosen else "")))
    return checks


# REQUIRED fields a2a.proto itself says may be empty: the last page's token ("empty if there are no more
# results"), and an empty page. ProtoJSON leaves an empty string or list out, so neither can be required there.
EMPTY_ALLOWED = {("lf.a2a.v1.ListTasksResponse", "next_page_token"), ("lf.a2a.v1.ListTasksResponse", "tasks")}


def _missing_required(message: Any, behavior: Any, prefix: str) -> list[str]:
    """The paths of REQUIRED fields that are unset or empty in `message` and the messages inside it."""
    missing = []
    for field in message.DESCRIPTOR.fields:
        if (message.DESCRIPTOR.full_name, field.name) in EMPTY_ALLOWED:
            continue
        path = f"{prefix}{field.json_name}"
        required = behavior.REQUIRED in field.GetOptions().Extensions[behavior.field_behavior]
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            continue
        if repeated:
            if required and len(value) == 0:
                missing.append(path)
            if field.message_type is not None:
                for i, item in enumerate(value):
                    missing.extend(_missing_required(item, behavior, f"{path}[{i}]."))
        elif field.message_type is not None:
            if message.HasField(field.name):
                if field.message_type.full_name.startswith("lf.a2a."):
                    missing.extend(_missing_required(value, behavior, f"{path}."))
            elif required:
                missing.append(path)
        elif required and value in ("", b""):
            missing.append(path)
    return missing


def _interface_checks(path: str, interface: Any) -> list[Check]:
    if not isinstance(interface, dict):
        return [Check(False, f"`{path}` must be an object")]
    binding = interface.get("protocolBinding")
    checks = [Check(binding in BINDINGS, f"`{path}.protocolBinding` {binding!r} is one of {', '.join(BINDINGS)}")]
    if isinstance(interface.get("url"), str):
        checks.append(_absolute(f"{path}.url", interface["url"], grpc=binding == "GRPC"))
    return checks


def _list(value: Any) -> list[Any]:
    """`value` if it is a list (a wrong type is reported by the required-property check), else []."""
    return value if isinstance(value, list) else []


def _absolute(path: str, url: str, *, grpc: bool = False) -> Check:
    try:
        parts = urlsplit(url if "://" in url or not grpc else f"grpc://{url}")
    except ValueError:
        return Check(False, f"`{path}` {url!r} is not a URL")
    ok = bool(parts.netloc) and (grpc or parts.scheme in ("http", "https"))
    return Check(ok, f"`{path}` {url!r} is an absolute {'address' if grpc else 'http(s) URL'}")


def _required(obj: Any, required: dict[str, type], path: str) -> list[Check]:
    if not isinstance(obj, dict):
        return [Check(False, f"`{path}` must be an object")]
    checks = []
    for name, kind in required.items():
        if name not in obj:
            checks.append(Check(False, f"`{path}.{name}` is required and missing"))
        elif not isinstance(obj[name], kind):
            checks.append(Check(False, f"`{path}.{name}` must be {_json_type(kind)}"))
    if not checks:
        checks.append(Check(True, f"every property the 0.3 schema requires of `{path}` is present, "
                                  "with the right type"))
    return checks


def _json_type(kind: type) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}[kind]


def check_signature(card: dict[str, Any], jwks: dict[str, Any]) -> list[Check]:
    """The served card's signatures (A2A 1.0 §8.4) checked against `jwks`: the server's own card keys."""
    from parley.protocol.card_signature import CardSignatureError, verify

    try:
        kid = verify(card, jwks)
    except CardSignatureError as exc:
        return [Check(False, f"signature: {exc}")]
    return [Check(True, f"signature verifies (JWS over the RFC 8785 form, key {kid} of this server's card JWKS)")]


__all__ = ["Check", "check_signature", "check_v03", "check_v1", "proto_checks"]
