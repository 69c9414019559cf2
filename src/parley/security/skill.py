"""The one skill a send request selects, from every place it can be named (refused when ambiguous).

A message selects a skill with `metadata["parley.skill"]`, on the request or on its message. Checks
(the skill's scopes, :mod:`parley.security.authorize`) and the agent (`RunContext.skill`) must see the
same skill, so both read it here: a value that is not one non-empty string, or two places naming
different skills, is InvalidParams; never "the first one found".
"""

from __future__ import annotations

from typing import Any

from parley.protocol.errors import InvalidParamsError

SKILL_KEY = "parley.skill"  # metadata key naming the skill a message is for


def requested_skill(request: Any) -> str | None:
    """The skill a send request selects (None: it names none); InvalidParamsError when it is not exactly one
    skill id: not a string, empty, or the request's and its message's metadata naming different skills."""
    message = getattr(request, "message", None)
    request_metadata, message_metadata = getattr(request, "metadata", None), getattr(message, "metadata", None)
    if not request_metadata and not message_metadata:  # nothing names a skill: most sends
        return None
    places = (("request", request_metadata), ("message", message_metadata))
    named: dict[str, str] = {}
    for where, metadata in places:
        if not isinstance(metadata, dict) or SKILL_KEY not in metadata:
            continue
        value = metadata[SKILL_KEY]
        if not isinstance(value, str) or not value.strip():
            raise InvalidParamsError(f"Invalid params: the {where} metadata {SKILL_KEY!r} must be one skill id "
                                     f"(a non-empty string), not {type(value).__name__} {_shown(value)}")
        named[where] = value
    if len(set(named.values())) > 1:
        raise InvalidParamsError(f"Invalid params: the request metadata names skill {named['request']!r} but the "
                                 f"message metadata names {named['message']!r} ({SKILL_KEY!r}): name one skill")
    return next(iter(named.values()), None)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["SKILL_KEY", "requested_skill"]
