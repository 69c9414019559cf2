"""Input limits on decoded requests (parts, text, inline files, metadata, ids): a precise error for each.

Called by the request pipeline on every decoded call, after authentication (see :func:`check_input`).
Every refusal is an InvalidParamsError (JSON-RPC -32602, HTTP 400, gRPC INVALID_ARGUMENT) whose message
names the field, the value and the limit with its setting, e.g.::

    Invalid params: 70 parts, over the limit of 64 (limits.max_parts) - at `params.message.parts`

The limits (`LimitSettings`, the `[server.limits]` table of parley.toml):

* `max_parts`: parts in one message;
* `max_text_bytes`: UTF-8 bytes of all the text parts of one message;
* `max_file_bytes`: inline file bytes (`raw`) of all the parts of one message;
* `max_metadata_bytes`, `max_metadata_depth`: the encoded JSON size and the nesting of each free-form
  JSON value a request carries: message metadata, part metadata, data parts, request metadata (send,
  cancel); the same size limit applies to a send's `configuration` and to a push-notification config;
* numbers in those values must fit a double (gRPC and ProtoJSON carry JSON numbers as doubles: a
  larger integer would make the task unreadable over gRPC);
* ids a message names (`messageId`, `taskId`, `contextId`, `referenceTaskIds`, push-config ids) are
  at most MAX_ID_CHARS characters, and a message's lists (`referenceTaskIds`, `extensions`) and a
  send's `acceptedOutputModes` hold at most MAX_LIST_ITEMS items.

The nesting of a whole body (`max_json_depth`) is checked earlier, while parsing
(:func:`parley.protocol.codec.loads`); `max_history_length` and `max_subscribers_per_task` are the
engine's (they depend on stored state). The checks are cheap for small requests: a few length
checks, and one encode per metadata object present.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import msgspec

from parley.protocol import models as m
from parley.protocol.codec import dumps, json_depth
from parley.protocol.errors import InvalidParamsError
from parley.protocol.operations import Operation
from parley.settings import LimitSettings

MAX_ID_CHARS = 1024  # an id a client chooses (UUIDs have 36)
MAX_LIST_ITEMS = 64  # referenceTaskIds, extensions, acceptedOutputModes
_FLOAT_MAX = sys.float_info.max
_LONG_NUMBER = re.compile(rb"[0-9]{300}")  # an integer this long may not fit a double: look closer


def check_input(call: Any, limits: LimitSettings) -> None:
    """Raise an A2AError naming the limit a decoded request goes over; nothing otherwise."""
    op = call.op
    req = call.request
    if op is Operation.SEND or op is Operation.STREAM:
        check_send(req, limits)
    elif op is Operation.CANCEL:
        if req.metadata is not None:
            _check_json(req.metadata, "params.metadata", limits)
    elif op is Operation.PUSH_SET:
        check_push_config(req, "params", limits)


def check_send(req: m.SendMessageRequest, limits: LimitSettings) -> None:
    """The limits on a SendMessage / SendStreamingMessage request."""
    msg = req.message
    check_message(msg, "params.message", limits)
    if req.metadata is not None:
        _check_json(req.metadata, "params.metadata", limits)
    conf = req.configuration
    if conf is not None:
        if conf.accepted_output_modes is not None:
            _check_list(conf.accepted_output_modes, "params.configuration.acceptedOutputModes")
        if conf.task_push_notification_config is not None:
            check_push_config(conf.task_push_notification_config, "params.configuration.taskPushNotificationConfig",
                              limits)


def check_message(msg: m.Message, path: str, limits: LimitSettings) -> None:
    """Parts, text, inline files, metadata, ids and lists of one message."""
    parts = msg.parts
    if len(parts) > limits.max_parts:
        raise _over(f"{path}.parts", f"{len(parts)} parts", limits.max_parts, "max_parts")
    _check_id(msg.message_id, f"{path}.messageId")
    if msg.task_id is not None:
        _check_id(msg.task_id, f"{path}.taskId")
    if msg.context_id is not None:
        _check_id(msg.context_id, f"{path}.contextId")
    if msg.reference_task_ids is not None:
        _check_list(msg.reference_task_ids, f"{path}.referenceTaskIds")
        for i, ref in enumerate(msg.reference_task_ids):
            _check_id(ref, f"{path}.referenceTaskIds[{i}]")
    if msg.extensions is not None:
        _check_list(msg.extensions, f"{path}.extensions")
    text_chars = 0
    file_bytes = 0
    for i, part in enumerate(parts):
        if part.text is not None:
            text_chars += len(part.text)
        elif part.raw is not None:
            file_bytes += len(part.raw)
        elif part.data is not msgspec.UNSET:
            _check_json(part.data, f"{path}.parts[{i}].data", limits)
        if part.metadata is not None:
            _check_json(part.metadata, f"{path}.parts[{i}].metadata", limits)
    if text_chars * 4 > limits.max_text_bytes:  # a character is at most 4 UTF-8 bytes: count them only now
        text_bytes = sum(len(p.text.encode("utf-8", "surrogatepass")) for p in parts if p.text is not None)
        if text_bytes > limits.max_text_bytes:
            raise _over(f"{path}.parts", f"{text_bytes} bytes of text (UTF-8)", limits.max_text_bytes,
                        "max_text_bytes")
    if file_bytes > limits.max_file_bytes:
        raise _over(f"{path}.parts", f"{file_bytes} bytes of inline files", limits.max_file_bytes, "max_file_bytes")
    if msg.metadata is not None:
        _check_json(msg.metadata, f"{path}.metadata", limits)


def check_push_config(cfg: m.TaskPushNotificationConfig, path: str, limits: LimitSettings) -> None:
    """A push-notification config: its ids, and its encoded size (url, token, credentials)."""
    if cfg.task_id:
        _check_id(cfg.task_id, f"{path}.taskId")
    if cfg.id:
        _check_id(cfg.id, f"{path}.id")
    size = len(dumps(cfg))
    if size > limits.max_metadata_bytes:
        raise _over(path, f"{size} bytes (encoded)", limits.max_metadata_bytes, "max_metadata_bytes")


def _check_json(value: Any, path: str, limits: LimitSettings) -> None:
    """One free-form JSON value (metadata, a data part): size, nesting, numbers."""
    if value is None or isinstance(value, (bool, int, float)) and not _huge(value):
        return
    encoded = dumps(value)
    if len(encoded) > limits.max_metadata_bytes:
        raise _over(path, f"{len(encoded)} bytes (encoded)", limits.max_metadata_bytes, "max_metadata_bytes")
    depth = json_depth(encoded, limits.max_metadata_depth)
    if depth > limits.max_metadata_depth:
        raise _over(path, f"nesting of {depth} levels", limits.max_metadata_depth, "max_metadata_depth")
    if _LONG_NUMBER.search(encoded) is not None:
        _check_numbers(value, path)


def _huge(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_MAX


def _check_numbers(value: Any, path: str) -> None:
    """Refuse an integer that does not fit a double (walks the value without recursion; it is small)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif _huge(item):
            raise InvalidParamsError(
                f"Invalid params: a number with {len(str(item).lstrip('-'))} digits does not fit a double "
                f"(JSON numbers are carried as doubles) - at `{path}`"
            )


def _check_id(value: str, path: str) -> None:
    if len(value) > MAX_ID_CHARS:
        raise _over(path, f"an id of {len(value)} characters", MAX_ID_CHARS, None)


def _check_list(items: list[Any], path: str) -> None:
    if len(items) > MAX_LIST_ITEMS:
        raise _over(path, f"{len(items)} items", MAX_LIST_ITEMS, None)


def _over(path: str, what: str, limit: int, setting: str | None) -> InvalidParamsError:
    named = f" (limits.{setting})" if setting else ""
    return InvalidParamsError(f"Invalid params: {what}, over the limit of {limit}{named} - at `{path}`")


__all__ = ["MAX_ID_CHARS", "MAX_LIST_ITEMS", "check_input", "check_message", "check_push_config", "check_send"]
