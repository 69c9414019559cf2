"""The A2A 0.3 HTTP+JSON dialect: the ProtoJSON of the 0.3 protobuf schema (package `a2a.v1`).

0.3 over HTTP+JSON does not use the kind-tagged JSON of 0.3 JSON-RPC; its
bodies are the protobuf JSON mapping of the 0.3 `a2a.proto`:

* a message carries `content` (not `parts`) and `role: ROLE_USER|ROLE_AGENT`;
* a part is `{text}`, `{file: {fileWithUri|fileWithBytes, mimeType, name}}` or
  `{data: {data: {...}}}`, each with optional `metadata`;
* states are `TASK_STATE_*`, with `TASK_STATE_CANCELLED` (double L);
* SendMessage answers `{task}` or `{message}`, streams send `StreamResponse`
  (`task`, `message`, `statusUpdate`, `artifactUpdate`), status updates carry `final`;
* push configs are `{name: "tasks/{id}/pushNotificationConfigs/{cid}", pushNotificationConfig: {...}}`.

As ProtoJSON parsers must, decoding accepts the proto field names as well as the
JSON names (`message_id` and `messageId`; `request` and `message`; never both in one
object), enum numbers as well as names, and treats `null` as absent. Unknown fields are ignored, as the
official SDK does. Encoding emits only fields of the 0.3 schema, because the 0.3.26
SDK parses strictly (`referenceTaskIds`, and `mediaType`/`filename` on text and data
parts, have no 0.3 field and are dropped).

Two choices follow the official SDKs rather than the letter of the schema:

* `fileWithBytes`: both SDKs put the *base64 text* of the content into the proto
  `bytes` field, so on the wire the content is base64-encoded twice. Parley encodes
  the same way; when decoding, a value whose decoded bytes are not themselves
  base64 text is taken as the content (a client that encodes once).
* push-config creation: both SDK clients send the whole
  `CreateTaskPushNotificationConfigRequest` (`{parent, configId, config}`) although
  the HTTP rule names `config` as the body; Parley accepts either and its client
  sends the SDK form.

Blocking follows proto presence, like the SDK's 0.3 compat layer: without
`configuration` a send blocks; with a `configuration` that omits `blocking`
(false in ProtoJSON) it returns at once. `historyLength` 0 in a send configuration
means "no limit" (proto3 cannot tell 0 from unset).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from parley.protocol import models as m
from parley.protocol.codec import expect_object as _obj
from parley.protocol.codec import from_wire, to_wire
from parley.protocol.codec import invalid as _bad
from parley.protocol.codec import json_type as _json_type
from parley.protocol.operations import Operation
from parley.protocol.states import is_interrupted, is_terminal
from parley.protocol.v0_3_cards import security_to_v03
from parley.protocol.v1_0 import without_1_1

VERSION = "0.3"
FULL_VERSION = "0.3.0"
DATA_COMPAT_KEY = "data_part_compat"

STATE_TO_V03: dict[m.TaskState, str] = {
    m.TaskState.SUBMITTED: "TASK_STATE_SUBMITTED",
    m.TaskState.WORKING: "TASK_STATE_WORKING",
    m.TaskState.INPUT_REQUIRED: "TASK_STATE_INPUT_REQUIRED",
    m.TaskState.AUTH_REQUIRED: "TASK_STATE_AUTH_REQUIRED",
    m.TaskState.COMPLETED: "TASK_STATE_COMPLETED",
    m.TaskState.FAILED: "TASK_STATE_FAILED",
    m.TaskState.CANCELED: "TASK_STATE_CANCELLED",
    m.TaskState.REJECTED: "TASK_STATE_REJECTED",
}
STATE_FROM_V03: dict[str, m.TaskState] = {v: k for k, v in STATE_TO_V03.items()}
# Enum numbers of the 0.3 proto (ProtoJSON parsers accept them in place of names).
STATE_NUMBERS: dict[int, str] = {
    1: "TASK_STATE_SUBMITTED",
    2: "TASK_STATE_WORKING",
    3: "TASK_STATE_COMPLETED",
    4: "TASK_STATE_FAILED",
    5: "TASK_STATE_CANCELLED",
    6: "TASK_STATE_INPUT_REQUIRED",
    7: "TASK_STATE_REJECTED",
    8: "TASK_STATE_AUTH_REQUIRED",
}
ROLE_NUMBERS: dict[int, str] = {1: "ROLE_USER", 2: "ROLE_AGENT"}
ROLES = ("ROLE_USER", "ROLE_AGENT")

_TASK_NAME = re.compile(r"tasks/([^/]+)")
_CONFIG_NAME = re.compile(r"tasks/([^/]+)/pushNotificationConfigs/([^/]*)")  # no config id yet: the server picks


# --- small checked accessors -------------------------------------------------------


def _field(obj: dict[str, Any], path: str, json_name: str, proto_name: str | None = None) -> tuple[Any, str]:
    """The value of a field under its JSON name or its proto name (None if absent), and its path.

    An object that names the field both ways is refused, as protobuf's JSON parser refuses it."""
    if proto_name is not None and proto_name != json_name and proto_name in obj:
        if json_name in obj:
            raise _bad(path, f"`{json_name}` and `{proto_name}` are the JSON name and the proto name of one "
                             "field; send it once")
        return obj[proto_name], f"{path}.{proto_name}"
    return obj.get(json_name), f"{path}.{json_name}"


def _str(value: Any, path: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise _bad(path, "a non-empty string is required")
        return None
    if not isinstance(value, str):
        raise _bad(path, f"expected a string, got {_json_type(value)}")
    return value


def _int(value: Any, path: str) -> int | None:
    """An int32 the ProtoJSON way: a JSON number with no fraction, or a decimal string."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad(path, "expected an integer, got bool")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        text = value.strip()
        if _is_number(text.removeprefix("-")):
            value = int(text)
    if not isinstance(value, int):
        raise _bad(path, f"expected an integer, got {_json_type(value)}")
    if not -(2**31) <= value < 2**31:
        raise _bad(path, "the integer is out of the int32 range")
    return value


def _bool(value: Any, path: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _bad(path, f"expected true or false, got {_json_type(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad(path, f"expected an array, got {_json_type(value)}")
    return value


def _str_list(value: Any, path: str) -> list[str] | None:
    items = _list(value, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise _bad(f"{path}[{i}]", f"expected a string, got {_json_type(item)}")
    return items if value is not None else None


def _struct(value: Any, path: str) -> dict[str, Any] | None:
    """A google.protobuf.Struct: any JSON object."""
    if value is None:
        return None
    return _obj(value, path)


def _enum(value: Any, path: str, names: tuple[str, ...] | list[str], numbers: dict[int, str], what: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value in numbers:
        return numbers[value]
    if isinstance(value, str) and value in names:
        return value
    if isinstance(value, str) and _is_number(value) and int(value) in numbers:
        return numbers[int(value)]
    shown = repr(value)[:80] if isinstance(value, (str, int)) else _json_type(value)
    raise _bad(path, f"unknown {what} {shown} (expected one of {', '.join(names)})")


def _is_number(text: str) -> bool:
    """ASCII decimal digits, few enough for int() (`"²".isdigit()` is true, and int() refuses it)."""
    return text.isascii() and text.isdigit() and len(text) <= 20


def state_from_v03(value: Any, path: str) -> m.TaskState:
    """A 0.3 `TASK_STATE_*` name (or number) as the canonical state."""
    return STATE_FROM_V03[_enum(value, path, list(STATE_FROM_V03), STATE_NUMBERS, "task state")]


# --- 0.3 ProtoJSON -> canonical (1.0-shaped dicts) ------------------------------------


def _file_bytes_from_v03(value: Any, path: str) -> str:
    """The canonical (single base64) form of a `fileWithBytes` value; see the module notes."""
    if not isinstance(value, str):
        raise _bad(path, f"expected a base64 string, got {_json_type(value)}")
    try:
        outer = base64.b64decode(_pad(value.replace("-", "+").replace("_", "/")), validate=True)
    except (binascii.Error, ValueError):
        raise _bad(path, "not valid base64") from None
    try:
        inner_text = outer.decode("ascii")
        if not inner_text or len(inner_text) % 4:
            raise ValueError
        content = base64.b64decode(inner_text.replace("-", "+").replace("_", "/"), validate=True)
    except (UnicodeDecodeError, binascii.Error, ValueError):
        content = outer  # a client that put the content itself into the bytes field
    return base64.b64encode(content).decode("ascii")


def _pad(text: str) -> str:
    return text + "=" * (-len(text) % 4)


def part_from_v03(part: Any, path: str) -> dict[str, Any]:
    """A 0.3 proto Part as a 1.0 part dict."""
    part = _obj(part, path)
    out: dict[str, Any] = {}
    meta = _struct(part.get("metadata"), f"{path}.metadata")
    if meta is not None:
        out["metadata"] = meta
    present = [k for k in ("text", "file", "data") if part.get(k) is not None]
    if len(present) > 1:
        raise _bad(path, f"a part has exactly one of `text`, `file` or `data`, not {' and '.join(present)}")
    if not present:
        if "kind" in part:
            raise _bad(f"{path}.kind", "0.3 HTTP+JSON parts have no `kind`; use `text`, `file` or `data`")
        raise _bad(path, "a part needs `text`, `file` or `data`")
    kind = present[0]
    if kind == "text":
        if not isinstance(part["text"], str):
            raise _bad(f"{path}.text", f"expected a string, got {_json_type(part['text'])}")
        out["text"] = part["text"]
    elif kind == "file":
        fpath = f"{path}.file"
        file = _obj(part["file"], fpath)
        uri, upath = _field(file, fpath, "fileWithUri", "file_with_uri")
        raw, rpath = _field(file, fpath, "fileWithBytes", "file_with_bytes")
        if uri is not None and raw is not None:
            raise _bad(fpath, "a file has `fileWithUri` or `fileWithBytes`, not both")
        if uri is not None:
            out["url"] = _str(uri, upath, required=True)
        elif raw is not None:
            out["raw"] = _file_bytes_from_v03(raw, rpath)
        else:
            raise _bad(fpath, "a file needs `fileWithUri` or `fileWithBytes`")
        mime, mpath = _field(file, fpath, "mimeType", "mime_type")
        if _str(mime, mpath) is not None:
            out["mediaType"] = mime
        name = _str(file.get("name"), f"{fpath}.name")
        if name is not None:
            out["filename"] = name
    else:
        dpath = f"{path}.data"
        data_part = _obj(part["data"], dpath)
        data = data_part.get("data")
        if data is None:
            raise _bad(f"{dpath}.data", "a data part needs `data` (an object): {\"data\": {\"data\": {...}}}")
        data = _obj(data, f"{dpath}.data")
        if meta and meta.get(DATA_COMPAT_KEY) and "value" in data:
            data = data["value"]
            rest = {k: v for k, v in meta.items() if k != DATA_COMPAT_KEY}
            if rest:
                out["metadata"] = rest
            else:
                out.pop("metadata", None)
        out["data"] = data
    return out


def message_from_v03(msg: Any, path: str = "params.message") -> dict[str, Any]:
    """A 0.3 proto Message as a 1.0 message dict."""
    msg = _obj(msg, path)
    out: dict[str, Any] = {}
    mid, mpath = _field(msg, path, "messageId", "message_id")
    out["messageId"] = _str(mid, mpath, required=True)
    for json_name, proto_name in (("contextId", "context_id"), ("taskId", "task_id")):
        value, vpath = _field(msg, path, json_name, proto_name)
        if _str(value, vpath) is not None:
            out[json_name] = value
    role = msg.get("role")
    if role is None:
        raise _bad(f"{path}.role", "a message needs `role` (ROLE_USER or ROLE_AGENT)")
    out["role"] = _enum(role, f"{path}.role", ROLES, ROLE_NUMBERS, "role")
    content = msg.get("content")
    if content is None and msg.get("parts") is not None:
        raise _bad(f"{path}.content", "0.3 HTTP+JSON messages carry their parts in `content`, not `parts`")
    parts = _list(content, f"{path}.content")
    if not parts:
        raise _bad(f"{path}.content", "a message needs at least one part")
    out["parts"] = [part_from_v03(p, f"{path}.content[{i}]") for i, p in enumerate(parts)]
    meta = _struct(msg.get("metadata"), f"{path}.metadata")
    if meta is not None:
        out["metadata"] = meta
    ext = _str_list(msg.get("extensions"), f"{path}.extensions")
    if ext:
        out["extensions"] = ext
    return out


def _status_from_v03(status: Any, path: str) -> dict[str, Any]:
    status = _obj(status, path)
    state = status.get("state")
    if state is None:
        raise _bad(f"{path}.state", "a status needs `state`")
    out: dict[str, Any] = {"state": state_from_v03(state, f"{path}.state").value}
    msg, mpath = _field(status, path, "message", "update")
    if msg is not None:
        out["message"] = message_from_v03(msg, mpath)
    ts = _str(status.get("timestamp"), f"{path}.timestamp")
    if ts is not None:
        out["timestamp"] = ts
    return out


def _artifact_from_v03(art: Any, path: str) -> dict[str, Any]:
    art = _obj(art, path)
    aid, apath = _field(art, path, "artifactId", "artifact_id")
    out: dict[str, Any] = {"artifactId": _str(aid, apath, required=True)}
    for key in ("name", "description"):
        if _str(art.get(key), f"{path}.{key}") is not None:
            out[key] = art[key]
    out["parts"] = [part_from_v03(p, f"{path}.parts[{i}]") for i, p in enumerate(_list(art.get("parts"), f"{path}.parts"))]
    meta = _struct(art.get("metadata"), f"{path}.metadata")
    if meta is not None:
        out["metadata"] = meta
    ext = _str_list(art.get("extensions"), f"{path}.extensions")
    if ext:
        out["extensions"] = ext
    return out


def _ids(obj: dict[str, Any], path: str, *pairs: tuple[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for json_name, proto_name in pairs:
        value, vpath = _field(obj, path, json_name, proto_name)
        out[json_name] = _str(value, vpath) or ""
    return out


def task_from_v03(task: Any, path: str = "result") -> dict[str, Any]:
    """A 0.3 proto Task as a 1.0 task dict."""
    task = _obj(task, path)
    out = _ids(task, path, ("id", "id"), ("contextId", "context_id"))
    out["status"] = _status_from_v03(task.get("status"), f"{path}.status")
    if task.get("artifacts") is not None:
        out["artifacts"] = [
            _artifact_from_v03(a, f"{path}.artifacts[{i}]")
            for i, a in enumerate(_list(task["artifacts"], f"{path}.artifacts"))
        ]
    if task.get("history") is not None:
        out["history"] = [
            message_from_v03(x, f"{path}.history[{i}]") for i, x in enumerate(_list(task["history"], f"{path}.history"))
        ]
    meta = _struct(task.get("metadata"), f"{path}.metadata")
    if meta is not None:
        out["metadata"] = meta
    return out


def _push_inner_from_v03(cfg: Any, path: str) -> dict[str, Any]:
    """A 0.3 PushNotificationConfig as the url/id/token/authentication of a canonical config."""
    cfg = _obj(cfg, path)
    out: dict[str, Any] = {"url": _str(cfg.get("url"), f"{path}.url", required=True)}
    for key in ("id", "token"):
        if _str(cfg.get(key), f"{path}.{key}") is not None:
            out[key] = cfg[key]
    auth = cfg.get("authentication")
    if auth is not None:
        apath = f"{path}.authentication"
        auth = _obj(auth, apath)
        schemes = _str_list(auth.get("schemes"), f"{apath}.schemes") or []
        if not schemes:
            raise _bad(f"{apath}.schemes", "expected a non-empty array")
        out["authentication"] = {"scheme": schemes[0]}
        creds = _str(auth.get("credentials"), f"{apath}.credentials")
        if creds is not None:
            out["authentication"]["credentials"] = creds
    return out


def _push_config_from_v03(cfg: Any, path: str, task_id: str | None) -> dict[str, Any]:
    """A 0.3 TaskPushNotificationConfig ({name, pushNotificationConfig}) as a canonical config dict."""
    cfg = _obj(cfg, path)
    inner, ipath = _field(cfg, path, "pushNotificationConfig", "push_notification_config")
    if inner is None:
        raise _bad(ipath, "a push notification config needs `pushNotificationConfig`")
    out = _push_inner_from_v03(inner, ipath)
    name = _str(cfg.get("name"), f"{path}.name")
    if name is not None:
        found = _CONFIG_NAME.fullmatch(name)
        if found is None:
            raise _bad(f"{path}.name", "expected `tasks/{taskId}/pushNotificationConfigs/{configId}`")
        if task_id is not None and found.group(1) != task_id:
            raise _bad(f"{path}.name", f"names task {found.group(1)!r}, but the URL names task {task_id!r}")
        task_id = found.group(1)
        if found.group(2):
            if out.get("id") and out["id"] != found.group(2):
                raise _bad(f"{path}.name",
                           f"names config {found.group(2)!r}, but `pushNotificationConfig.id` is {out['id']!r}")
            out["id"] = found.group(2)
    out["taskId"] = task_id or ""
    return out


def _check_name(params: dict[str, Any], task_id: Any) -> None:
    """A `name: "tasks/{id}"` in a body (CancelTaskRequest, TaskSubscriptionRequest) must match the URL."""
    name = params.get("name")
    if name is None:
        return
    if not isinstance(name, str) or _TASK_NAME.fullmatch(name) is None:
        raise _bad("params.name", "expected `tasks/{id}`")
    if name != f"tasks/{task_id}":
        raise _bad("params.name", f"{name!r} does not match the task in the URL ({task_id!r})")


def _send_from_v03(p: dict[str, Any]) -> m.SendMessageRequest:
    msg, mpath = _field(p, "params", "message", "request")
    if msg is None:
        raise _bad("params.message", "a SendMessageRequest needs `message`")
    out: dict[str, Any] = {"message": message_from_v03(msg, mpath)}
    conf, cpath = _field(p, "params", "configuration")
    if conf is not None:
        conf = _obj(conf, cpath)
        c: dict[str, Any] = {}
        modes, mpath = _field(conf, cpath, "acceptedOutputModes", "accepted_output_modes")
        modes = _str_list(modes, mpath)
        if modes:
            c["acceptedOutputModes"] = modes
        hist, hpath = _field(conf, cpath, "historyLength", "history_length")
        hist = _int(hist, hpath)
        if hist is not None and hist < 0:
            raise _bad(hpath, "must not be negative")
        if hist:  # proto3: 0 is "unset", i.e. no limit
            c["historyLength"] = hist
        blocking = _bool(conf.get("blocking"), f"{cpath}.blocking")
        c["returnImmediately"] = not blocking  # absent is false in ProtoJSON: return at once
        push, ppath = _field(conf, cpath, "pushNotification", "push_notification")
        if push is not None:
            inner = _push_inner_from_v03(push, ppath)
            inner["taskId"] = ""
            c["taskPushNotificationConfig"] = inner
        out["configuration"] = c
    meta = _struct(p.get("metadata"), "params.metadata")
    if meta is not None:
        out["metadata"] = meta
    return from_wire(out, m.SendMessageRequest)


def _list_from_v03(p: dict[str, Any]) -> m.ListTasksRequest:
    q: dict[str, Any] = {}
    for json_name, proto_name in (("contextId", "context_id"), ("pageToken", "page_token"),
                                  ("statusTimestampAfter", "status_timestamp_after")):
        value, vpath = _field(p, "params", json_name, proto_name)
        if _str(value, vpath) is not None:
            q[json_name] = value
    for json_name, proto_name in (("pageSize", "page_size"), ("historyLength", "history_length")):
        value, vpath = _field(p, "params", json_name, proto_name)
        value = _int(value, vpath)
        if value is not None:
            q[json_name] = value
    inc, ipath = _field(p, "params", "includeArtifacts", "include_artifacts")
    if _bool(inc, ipath):
        q["includeArtifacts"] = True
    status = p.get("status")
    if status is not None and status != "":
        q["status"] = state_from_v03(status, "params.status").value
    return from_wire(q, m.ListTasksRequest)


def decode(op: Operation, params: Any) -> Any:
    """Validate 0.3 HTTP+JSON params (path, query and body merged) into the canonical request for `op`.

    Path parameters arrive as `id` (the task id, or the config id on config paths)
    and `taskId` (the task id on config paths).
    """
    p = _obj(params if params is not None else {}, "params")
    if op in (Operation.SEND, Operation.STREAM):
        return _send_from_v03(p)
    if op is Operation.GET:
        hist, hpath = _field(p, "params", "historyLength", "history_length")
        return from_wire({"id": p.get("id"), "historyLength": _int(hist, hpath)}, m.GetTaskRequest)
    if op in (Operation.CANCEL, Operation.SUBSCRIBE):
        _check_name(p, p.get("id"))
        cls = m.CancelTaskRequest if op is Operation.CANCEL else m.SubscribeToTaskRequest
        return from_wire({"id": p.get("id")}, cls)
    if op is Operation.LIST:
        return _list_from_v03(p)
    if op is Operation.PUSH_SET:
        task_id = p.get("taskId")
        parent = _str(p.get("parent"), "params.parent")
        if parent is not None and parent != f"tasks/{task_id}":
            raise _bad("params.parent", f"{parent!r} does not match the task in the URL ({task_id!r})")
        if p.get("config") is not None:  # the whole CreateTaskPushNotificationConfigRequest (what the SDKs send)
            cfg = _push_config_from_v03(p["config"], "params.config", task_id)
            config_id, cid_path = _field(p, "params", "configId", "config_id")
            config_id = _str(config_id, cid_path)
            if config_id is not None:
                if cfg.get("id") and cfg["id"] != config_id:
                    raise _bad(cid_path, f"{config_id!r} differs from the config's id {cfg['id']!r}")
                cfg["id"] = config_id
        else:  # the TaskPushNotificationConfig itself (the HTTP rule's `body: "config"`)
            cfg = _push_config_from_v03(p, "params", task_id)
        cfg["taskId"] = task_id
        return from_wire(cfg, m.TaskPushNotificationConfig)
    if op in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        return from_wire({"taskId": p.get("taskId"), "id": p.get("id")}, m.TaskPushConfigRef)
    if op is Operation.PUSH_LIST:
        ref: dict[str, Any] = {"taskId": p.get("taskId")}
        size, spath = _field(p, "params", "pageSize", "page_size")
        size = _int(size, spath)
        if size:
            ref["pageSize"] = size
        token, tpath = _field(p, "params", "pageToken", "page_token")
        if _str(token, tpath) is not None:
            ref["pageToken"] = token
        return from_wire(ref, m.ListTaskPushConfigsRequest)
    return from_wire({}, m.GetExtendedAgentCardRequest)


# --- canonical -> 0.3 ProtoJSON ------------------------------------------------------


def _file_bytes_to_v03(raw_b64: str) -> str:
    """Canonical base64 -> the SDK's `fileWithBytes` (base64 of the base64 text)."""
    return base64.b64encode(raw_b64.encode("ascii")).decode("ascii")


def part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 part dict as a 0.3 proto Part."""
    out: dict[str, Any]
    meta = part.get("metadata")
    if "text" in part:
        out = {"text": part["text"]}
    elif "raw" in part or "url" in part:
        file: dict[str, Any] = (
            {"fileWithBytes": _file_bytes_to_v03(part["raw"])} if "raw" in part else {"fileWithUri": part["url"]}
        )
        if "mediaType" in part:
            file["mimeType"] = part["mediaType"]
        if "filename" in part:
            file["name"] = part["filename"]
        out = {"file": file}
    else:
        data = part.get("data")
        if not isinstance(data, dict):  # 0.3 data parts hold objects only; wrap like the official SDK
            meta = dict(meta or {})
            meta[DATA_COMPAT_KEY] = True
            data = {"value": data}
        out = {"data": {"data": data}}
    if meta is not None:
        out["metadata"] = meta
    return out


def message_to_v03(msg: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 message dict as a 0.3 proto Message (`content`, no `referenceTaskIds`)."""
    out: dict[str, Any] = {"messageId": msg["messageId"]}
    for key in ("contextId", "taskId"):
        if msg.get(key):
            out[key] = msg[key]
    out["role"] = msg.get("role", "ROLE_AGENT")
    out["content"] = [part_to_v03(p) for p in msg.get("parts", [])]
    for key in ("metadata", "extensions"):
        if msg.get(key) is not None:
            out[key] = msg[key]
    return out


def _status_to_v03(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": STATE_TO_V03[m.TaskState(status["state"])]}
    if "message" in status:
        out["message"] = message_to_v03(status["message"])
    if "timestamp" in status:
        out["timestamp"] = status["timestamp"]
    return out


def _artifact_to_v03(art: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": art["artifactId"]}
    for key in ("name", "description"):
        if key in art:
            out[key] = art[key]
    out["parts"] = [part_to_v03(p) for p in art.get("parts", [])]
    for key in ("metadata", "extensions"):
        if art.get(key) is not None:
            out[key] = art[key]
    return out


def task_to_v03(task: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 task dict as a 0.3 proto Task."""
    out: dict[str, Any] = {"id": task["id"], "contextId": task["contextId"], "status": _status_to_v03(task["status"])}
    if "artifacts" in task:
        out["artifacts"] = [_artifact_to_v03(a) for a in task["artifacts"]]
    if "history" in task:
        out["history"] = [message_to_v03(x) for x in task["history"]]
    if task.get("metadata") is not None:
        out["metadata"] = task["metadata"]
    return out


def _event_body(event: m.StreamEvent, interrupted_final: bool = True) -> tuple[str, dict[str, Any]]:
    data = to_wire(without_1_1(event))  # 0.3 has no generation (A2A 1.1)
    if isinstance(event, m.Task):
        return "task", task_to_v03(data)
    if isinstance(event, m.Message):
        return "message", message_to_v03(data)
    out: dict[str, Any] = {"taskId": data["taskId"], "contextId": data["contextId"]}
    if isinstance(event, m.TaskStatusUpdateEvent):
        out["status"] = _status_to_v03(data["status"])
        state = event.status.state
        out["final"] = is_terminal(state) or (interrupted_final and is_interrupted(state))
        key = "statusUpdate"
    else:
        out["artifact"] = _artifact_to_v03(data["artifact"])
        out["append"] = event.append
        out["lastChunk"] = event.last_chunk
        key = "artifactUpdate"
    if data.get("metadata") is not None:
        out["metadata"] = data["metadata"]
    return key, out


def encode_event(event: m.StreamEvent, *, interrupted_final: bool = True) -> dict[str, Any]:
    """A StreamResponse: `{task}`, `{message}`, `{statusUpdate}` (with `final`) or `{artifactUpdate}`.

    `final` marks the stream's last status update: a terminal state, and an interrupted one when it
    ends the stream (`interrupted_final`: a send's stream does, a subscription does not).
    """
    key, body = _event_body(event, interrupted_final)
    return {key: body}


def push_config_to_v03(cfg: m.TaskPushNotificationConfig) -> dict[str, Any]:
    """A canonical push config as a 0.3 proto TaskPushNotificationConfig."""
    inner: dict[str, Any] = {"id": cfg.id, "url": cfg.url} if cfg.id else {"url": cfg.url}
    if cfg.token is not None:
        inner["token"] = cfg.token
    if cfg.authentication is not None:
        auth: dict[str, Any] = {"schemes": [cfg.authentication.scheme]}
        if cfg.authentication.credentials is not None:
            auth["credentials"] = cfg.authentication.credentials
        inner["authentication"] = auth
    if not cfg.id:  # not created yet: the server names it
        return {"pushNotificationConfig": inner}
    return {"name": f"tasks/{cfg.task_id}/pushNotificationConfigs/{cfg.id}", "pushNotificationConfig": inner}


def encode_card(card: m.AgentCard) -> dict[str, Any]:
    """An agent card as the 0.3 AgentCard (the proto's fields, which the 0.3 JSON card shares)."""
    data = to_wire(card)
    legacy = [i for i in card.supported_interfaces if i.protocol_version.split(".")[:2] == ["0", "3"]]
    primary = legacy[0] if legacy else card.supported_interfaces[0]
    caps = {k: v for k, v in data["capabilities"].items() if k in ("streaming", "pushNotifications", "extensions")}
    out: dict[str, Any] = {
        "protocolVersion": FULL_VERSION,
        "name": data["name"],
        "description": data["description"],
        "url": primary.url,
        "preferredTransport": primary.protocol_binding,
        "additionalInterfaces": [{"url": i.url, "transport": i.protocol_binding} for i in legacy],
        "version": data["version"],
        "capabilities": caps,
        "defaultInputModes": data["defaultInputModes"],
        "defaultOutputModes": data["defaultOutputModes"],
        "skills": [],
        "supportsAuthenticatedExtendedCard": bool(card.capabilities.extended_agent_card),
    }
    # no `signatures`: they cover the 1.0 form (docs/cards.md), which a pure 0.3 card does not carry
    for key in ("provider", "documentationUrl", "securitySchemes", "securityRequirements", "iconUrl"):
        if key in data:
            out[key] = data[key]
    out["skills"] = data["skills"]
    return security_to_v03(out)  # the 0.3 (OpenAPI) shapes the 0.3 SDK's AgentCard model validates


def encode_result(op: Operation, result: Any) -> Any:
    """Encode the result of a unary operation as 0.3 ProtoJSON."""
    if op is Operation.SEND:
        return encode_event(result)  # SendMessageResponse: {task} or {message}
    result = without_1_1(result)  # 0.3 has no generation (A2A 1.1)
    if op in (Operation.GET, Operation.CANCEL):
        return task_to_v03(to_wire(result))
    if op is Operation.LIST:
        data = to_wire(result)
        data["tasks"] = [task_to_v03(t) for t in data["tasks"]]
        return data
    if op in (Operation.PUSH_SET, Operation.PUSH_GET):
        return push_config_to_v03(result)
    if op is Operation.PUSH_LIST:
        return {"configs": [push_config_to_v03(c) for c in result.configs], "nextPageToken": result.next_page_token}
    if op is Operation.PUSH_DELETE:
        return {}
    if isinstance(result, m.AgentCard):
        return encode_card(result)
    return result


# --- client side: canonical -> 0.3 requests, 0.3 results -> canonical -------------------


def _send_to_v03(req: m.SendMessageRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"message": message_to_v03(to_wire(req.message))}
    conf = req.configuration
    c: dict[str, Any] = {"blocking": not (conf.return_immediately if conf else False)}
    if conf is not None:
        if conf.accepted_output_modes:
            c["acceptedOutputModes"] = conf.accepted_output_modes
        if conf.history_length:
            c["historyLength"] = conf.history_length
        if conf.task_push_notification_config is not None:
            c["pushNotification"] = push_config_to_v03(conf.task_push_notification_config)["pushNotificationConfig"]
    out["configuration"] = c
    if req.metadata is not None:
        out["metadata"] = req.metadata
    return out


def encode_request(op: Operation, request: Any) -> dict[str, Any]:
    """Client side: a canonical request as flat 0.3 HTTP+JSON params.

    Path parameters are `id` and `taskId` (as the server's routes name them); the
    transport puts them into the path and sends the rest as the query (GET, DELETE)
    or the body (POST).
    """
    if op in (Operation.SEND, Operation.STREAM):
        return _send_to_v03(request)
    if op is Operation.GET:
        out: dict[str, Any] = {"id": request.id}
        if request.history_length is not None:
            out["historyLength"] = request.history_length
        return out
    if op is Operation.CANCEL:
        return {"id": request.id, "name": f"tasks/{request.id}"}
    if op is Operation.SUBSCRIBE:
        return {"id": request.id}
    if op is Operation.LIST:
        data = to_wire(request)
        data.pop("tenant", None)
        if "status" in data:
            data["status"] = STATE_TO_V03[m.TaskState(data["status"])]
        return data
    if op is Operation.PUSH_SET:
        cfg = push_config_to_v03(request)
        out = {"taskId": request.task_id, "parent": f"tasks/{request.task_id}", "config": cfg}
        if request.id:
            out["configId"] = request.id
        return out
    if op in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        return {"taskId": request.task_id, "id": request.id}
    if op is Operation.PUSH_LIST:
        out = {"taskId": request.task_id}
        if request.page_size:
            out["pageSize"] = request.page_size
        if request.page_token:
            out["pageToken"] = request.page_token
        return out
    return {}


def decode_stream_event(data: Any, path: str = "result") -> m.StreamEvent:
    """Client side: a 0.3 StreamResponse / SendMessageResponse as the canonical event."""
    d = _obj(data, path)
    present = [k for k in ("task", "message", "msg", "statusUpdate", "status_update", "artifactUpdate",
                           "artifact_update") if d.get(k) is not None]
    if len(present) != 1:
        raise _bad(path, "expected exactly one of `task`, `message`, `statusUpdate` or `artifactUpdate`")
    key = present[0]
    value = d[key]
    vpath = f"{path}.{key}"
    if key == "task":
        return from_wire(task_from_v03(value, vpath), m.Task, what="result")
    if key in ("message", "msg"):
        return from_wire(message_from_v03(value, vpath), m.Message, what="result")
    ev = _obj(value, vpath)
    if key in ("statusUpdate", "status_update"):
        out = _ids(ev, vpath, ("taskId", "task_id"), ("contextId", "context_id"))
        out["status"] = _status_from_v03(ev.get("status"), f"{vpath}.status")
        meta = _struct(ev.get("metadata"), f"{vpath}.metadata")
        if meta is not None:
            out["metadata"] = meta
        return from_wire(out, m.TaskStatusUpdateEvent, what="result")
    out = _ids(ev, vpath, ("taskId", "task_id"), ("contextId", "context_id"))
    out["artifact"] = _artifact_from_v03(ev.get("artifact"), f"{vpath}.artifact")
    out["append"] = bool(_bool(ev.get("append"), f"{vpath}.append"))
    last, lpath = _field(ev, vpath, "lastChunk", "last_chunk")
    out["lastChunk"] = bool(_bool(last, lpath))
    meta = _struct(ev.get("metadata"), f"{vpath}.metadata")
    if meta is not None:
        out["metadata"] = meta
    return from_wire(out, m.TaskArtifactUpdateEvent, what="result")


def _push_config_result(data: Any, path: str) -> m.TaskPushNotificationConfig:
    return from_wire(_push_config_from_v03(data, path, None), m.TaskPushNotificationConfig, what="result")


def decode_result(op: Operation, data: Any) -> Any:
    """Client side: the canonical value of a unary 0.3 HTTP+JSON result."""
    if op in (Operation.SEND, Operation.STREAM, Operation.SUBSCRIBE):
        return decode_stream_event(data)
    if op in (Operation.GET, Operation.CANCEL):
        return from_wire(task_from_v03(data), m.Task, what="result")
    if op is Operation.LIST:
        d = _obj(data, "result")
        tasks = [task_from_v03(t, f"result.tasks[{i}]") for i, t in enumerate(_list(d.get("tasks"), "result.tasks"))]
        page = {
            "tasks": tasks,
            "nextPageToken": _str(d.get("nextPageToken"), "result.nextPageToken") or "",
            "pageSize": _int(d.get("pageSize"), "result.pageSize") or len(tasks),
            "totalSize": _int(d.get("totalSize"), "result.totalSize") or len(tasks),
        }
        return from_wire(page, m.ListTasksResponse, what="result")
    if op in (Operation.PUSH_SET, Operation.PUSH_GET):
        return _push_config_result(data, "result")
    if op is Operation.PUSH_LIST:
        d = _obj(data, "result")
        configs = [_push_config_result(c, f"result.configs[{i}]") for i, c in enumerate(_list(d.get("configs"),
                                                                                            "result.configs"))]
        return m.ListTaskPushConfigsResponse(configs=configs,
                                             next_page_token=_str(d.get("nextPageToken"), "result.nextPageToken") or "")
    if op is Operation.PUSH_DELETE:
        return None
    return data  # the card: parley.client.card.normalise_card reads 0.3 cards
