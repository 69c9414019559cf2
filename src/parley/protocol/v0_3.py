"""The A2A 0.3 dialect: converts 0.3 wire shapes to and from the canonical model.

0.3 differs from 1.0 in method names, `kind` discriminators on objects and
parts, lowercase state and role names, file parts (`file.bytes|uri`), the
`final` flag on status updates, `blocking` instead of `returnImmediately`, and
the push-config layout. Everything else passes through unchanged.
"""

from __future__ import annotations

from typing import Any

from parley.protocol import models as m
from parley.protocol.codec import expect_object as _obj
from parley.protocol.codec import from_wire, to_wire
from parley.protocol.codec import invalid as _bad
from parley.protocol.codec import json_type as _json_type
from parley.protocol.operations import Operation
from parley.protocol.states import is_interrupted, is_terminal
from parley.protocol.v1_0 import without_1_1

VERSION = "0.3"
FULL_VERSION = "0.3.0"
DATA_COMPAT_KEY = "data_part_compat"

METHODS: dict[str, Operation] = {
    "message/send": Operation.SEND,
    "message/stream": Operation.STREAM,
    "tasks/get": Operation.GET,
    "tasks/list": Operation.LIST,
    "tasks/cancel": Operation.CANCEL,
    "tasks/resubscribe": Operation.SUBSCRIBE,
    "tasks/pushNotificationConfig/set": Operation.PUSH_SET,
    "tasks/pushNotificationConfig/get": Operation.PUSH_GET,
    "tasks/pushNotificationConfig/list": Operation.PUSH_LIST,
    "tasks/pushNotificationConfig/delete": Operation.PUSH_DELETE,
    "agent/getAuthenticatedExtendedCard": Operation.EXTENDED_CARD,
}

STATE_TO_V03: dict[m.TaskState, str] = {
    m.TaskState.SUBMITTED: "submitted",
    m.TaskState.WORKING: "working",
    m.TaskState.INPUT_REQUIRED: "input-required",
    m.TaskState.AUTH_REQUIRED: "auth-required",
    m.TaskState.COMPLETED: "completed",
    m.TaskState.FAILED: "failed",
    m.TaskState.CANCELED: "canceled",
    m.TaskState.REJECTED: "rejected",
}
STATE_FROM_V03: dict[str, str] = {v: k.value for k, v in STATE_TO_V03.items()}
ROLE_TO_V03 = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}
ROLE_FROM_V03 = {v: k for k, v in ROLE_TO_V03.items()}





# --- 0.3 -> canonical (1.0-shaped dicts) -------------------------------------


def part_from_v03(part: Any, path: str) -> dict[str, Any]:
    """A 0.3 part (`kind` text/file/data) as a 1.0 part dict."""
    part = _obj(part, path)
    kind = part.get("kind")
    out: dict[str, Any] = {}
    if part.get("metadata") is not None:
        out["metadata"] = part["metadata"]
    if kind == "text":
        out["text"] = part.get("text")
        if not isinstance(out["text"], str):
            raise _bad(f"{path}.text", "a text part needs a string `text`")
    elif kind == "file":
        file = _obj(part.get("file"), f"{path}.file")
        if "bytes" in file and "uri" in file:
            raise _bad(f"{path}.file", "a file has `bytes` or `uri`, not both")
        if "bytes" in file:
            out["raw"] = file["bytes"]
        elif "uri" in file:
            out["url"] = file["uri"]
        else:
            raise _bad(f"{path}.file", "a file needs `bytes` or `uri`")
        if file.get("name") is not None:
            out["filename"] = file["name"]
        if file.get("mimeType") is not None:
            out["mediaType"] = file["mimeType"]
    elif kind == "data":
        if "data" not in part:
            raise _bad(f"{path}.data", "a data part needs `data`")
        data = part["data"]
        meta = part.get("metadata") or {}
        if isinstance(meta, dict) and meta.get(DATA_COMPAT_KEY) and isinstance(data, dict) and "value" in data:
            data = data["value"]
            rest = {k: v for k, v in meta.items() if k != DATA_COMPAT_KEY}
            if rest:
                out["metadata"] = rest
            else:
                out.pop("metadata", None)
        out["data"] = data
    elif kind is None:
        raise _bad(f"{path}.kind", "a 0.3 part needs `kind` (text, file or data)")
    else:
        raise _bad(f"{path}.kind", f"unknown part kind {kind!r} (expected text, file or data)")
    return out


def message_from_v03(msg: Any, path: str = "params.message") -> dict[str, Any]:
    """A 0.3 message as a 1.0 message dict (unvalidated beyond the 0.3 bits)."""
    msg = _obj(msg, path)
    out = {k: v for k, v in msg.items() if k not in ("kind", "role", "parts")}
    role = msg.get("role")
    if not isinstance(role, str) or role not in ROLE_FROM_V03:  # a list or object is not hashable: check first
        shown = repr(role) if isinstance(role, str) else _json_type(role)
        raise _bad(f"{path}.role", f"role must be 'user' or 'agent', got {shown}")
    out["role"] = ROLE_FROM_V03[role]
    parts = msg.get("parts")
    if not isinstance(parts, list):
        raise _bad(f"{path}.parts", f"expected an array, got {_json_type(parts)}")
    out["parts"] = [part_from_v03(p, f"{path}.parts[{i}]") for i, p in enumerate(parts)]
    return out


def _push_config_from_v03(cfg: Any, task_id: str, path: str) -> dict[str, Any]:
    cfg = _obj(cfg, path)
    out: dict[str, Any] = {"taskId": task_id, "url": cfg.get("url")}
    for key in ("id", "token"):
        if cfg.get(key) is not None:
            out[key] = cfg[key]
    auth = cfg.get("authentication")
    if auth is not None:
        auth = _obj(auth, f"{path}.authentication")
        schemes = auth.get("schemes") or []
        if not isinstance(schemes, list) or not schemes:
            raise _bad(f"{path}.authentication.schemes", "expected a non-empty array")
        out["authentication"] = {"scheme": schemes[0], "credentials": auth.get("credentials")}
    return out


def decode(op: Operation, params: Any) -> Any:
    """Validate 0.3 params into the canonical request for `op`."""
    p = _obj(params if params is not None else {}, "params")
    if op in (Operation.SEND, Operation.STREAM):
        conf = p.get("configuration")
        out: dict[str, Any] = {"message": message_from_v03(p.get("message"))}
        if conf is not None:
            conf = _obj(conf, "params.configuration")
            c: dict[str, Any] = {}
            if "acceptedOutputModes" in conf:
                c["acceptedOutputModes"] = conf["acceptedOutputModes"]
            if conf.get("historyLength"):  # 0.3: 0 means "no limit", as in the official SDK
                c["historyLength"] = conf["historyLength"]
            blocking = conf.get("blocking")
            if blocking is not None:
                if not isinstance(blocking, bool):
                    raise _bad("params.configuration.blocking", "expected a bool")
                c["returnImmediately"] = not blocking
            if conf.get("pushNotificationConfig") is not None:
                c["taskPushNotificationConfig"] = _push_config_from_v03(
                    conf["pushNotificationConfig"], "", "params.configuration.pushNotificationConfig"
                )
            out["configuration"] = c
        if p.get("metadata") is not None:
            out["metadata"] = p["metadata"]
        return from_wire(out, m.SendMessageRequest)
    if op is Operation.GET:
        return from_wire(_pick(p, "id", "historyLength", "metadata"), m.GetTaskRequest)
    if op is Operation.CANCEL:
        return from_wire(_pick(p, "id", "metadata"), m.CancelTaskRequest)
    if op is Operation.SUBSCRIBE:
        return from_wire(_pick(p, "id"), m.SubscribeToTaskRequest)
    if op is Operation.LIST:
        q = dict(p)
        if "status" in q and q["status"] is not None:
            state = STATE_FROM_V03.get(q["status"]) if isinstance(q["status"], str) else None
            if state is None:
                raise _bad("params.status", f"unknown task state {q['status']!r}")
            q["status"] = state
        return from_wire(q, m.ListTasksRequest)
    if op is Operation.PUSH_SET:
        task_id = p.get("taskId")
        if not isinstance(task_id, str) or not task_id:
            raise _bad("params.taskId", "a non-empty string is required")
        cfg = _push_config_from_v03(p.get("pushNotificationConfig"), task_id, "params.pushNotificationConfig")
        return from_wire(cfg, m.TaskPushNotificationConfig)
    if op in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        task_id, config_id = p.get("id"), p.get("pushNotificationConfigId")
        if not isinstance(task_id, str) or not task_id:
            raise _bad("params.id", "a non-empty string (the task id) is required")
        if config_id is None and op is Operation.PUSH_GET:
            config_id = task_id  # 0.3 allows omitting the config id: default config
        if not isinstance(config_id, str) or not config_id:
            raise _bad("params.pushNotificationConfigId", "a non-empty string is required")
        return from_wire({"taskId": task_id, "id": config_id}, m.TaskPushConfigRef)
    if op is Operation.PUSH_LIST:
        return from_wire({"taskId": p.get("id")}, m.ListTaskPushConfigsRequest)
    return from_wire({}, m.GetExtendedAgentCardRequest)


def _pick(p: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: p[k] for k in keys if k in p}


# --- canonical -> 0.3 --------------------------------------------------------


def part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 part dict as a 0.3 part."""
    out: dict[str, Any]
    if "text" in part:
        out = {"kind": "text", "text": part["text"]}
    elif "raw" in part or "url" in part:
        file: dict[str, Any] = {"bytes": part["raw"]} if "raw" in part else {"uri": part["url"]}
        if "filename" in part:
            file["name"] = part["filename"]
        if "mediaType" in part:
            file["mimeType"] = part["mediaType"]
        out = {"kind": "file", "file": file}
    else:
        data = part.get("data")
        if isinstance(data, dict):
            out = {"kind": "data", "data": data}
        else:  # 0.3 data parts hold objects only; wrap like the official SDK does
            meta = dict(part.get("metadata") or {})
            meta[DATA_COMPAT_KEY] = True
            return {"kind": "data", "data": {"value": data}, "metadata": meta}
    if "metadata" in part:
        out["metadata"] = part["metadata"]
    return out


def message_to_v03(msg: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 message dict as a 0.3 message."""
    out = dict(msg)
    out["kind"] = "message"
    out["role"] = ROLE_TO_V03.get(msg.get("role", ""), "agent")
    out["parts"] = [part_to_v03(p) for p in msg.get("parts", [])]
    return out


def _status_to_v03(status: dict[str, Any]) -> dict[str, Any]:
    out = dict(status)
    out["state"] = STATE_TO_V03[m.TaskState(status["state"])]
    if "message" in status:
        out["message"] = message_to_v03(status["message"])
    return out


def _artifact_to_v03(art: dict[str, Any]) -> dict[str, Any]:
    out = dict(art)
    out["parts"] = [part_to_v03(p) for p in art.get("parts", [])]
    return out


def task_to_v03(task: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 task dict as a 0.3 task."""
    out = dict(task)
    out["kind"] = "task"
    out["status"] = _status_to_v03(task["status"])
    if "history" in task:
        out["history"] = [message_to_v03(x) for x in task["history"]]
    if "artifacts" in task:
        out["artifacts"] = [_artifact_to_v03(a) for a in task["artifacts"]]
    return out


def encode_event(event: m.StreamEvent, *, interrupted_final: bool = True) -> dict[str, Any]:
    """A stream event in 0.3 shape (`kind`, and `final` on status updates).

    `final` marks the last event of the stream: a terminal state, and an interrupted one when
    it ends the stream (`interrupted_final`: a send's stream does, a subscription does not).
    """
    data = to_wire(without_1_1(event))  # 0.3 has no generation (A2A 1.1)
    if isinstance(event, m.Task):
        return task_to_v03(data)
    if isinstance(event, m.Message):
        return message_to_v03(data)
    if isinstance(event, m.TaskStatusUpdateEvent):
        data["kind"] = "status-update"
        data["status"] = _status_to_v03(data["status"])
        state = event.status.state
        data["final"] = is_terminal(state) or (interrupted_final and is_interrupted(state))
        return data
    data["kind"] = "artifact-update"
    data["artifact"] = _artifact_to_v03(data["artifact"])
    return data


def push_config_to_v03(cfg: m.TaskPushNotificationConfig) -> dict[str, Any]:
    """A canonical push config as a 0.3 TaskPushNotificationConfig."""
    inner: dict[str, Any] = {"id": cfg.id, "url": cfg.url}
    if cfg.token is not None:
        inner["token"] = cfg.token
    if cfg.authentication is not None:
        auth: dict[str, Any] = {"schemes": [cfg.authentication.scheme]}
        if cfg.authentication.credentials is not None:
            auth["credentials"] = cfg.authentication.credentials
        inner["authentication"] = auth
    return {"taskId": cfg.task_id, "pushNotificationConfig": inner}


def encode_result(op: Operation, result: Any) -> Any:
    """Encode the result of a unary operation in 0.3 shape."""
    if op is Operation.SEND:
        return encode_event(result)
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
        return [push_config_to_v03(c) for c in result.configs]
    if op is Operation.PUSH_DELETE:
        return None
    return result  # extended card: encoded by the card module


# --- client side: canonical -> 0.3 requests, 0.3 results -> canonical --------


def encode_request(op: Operation, request: Any) -> dict[str, Any]:
    """A canonical request as 0.3 params (used by Parley's client)."""
    if op in (Operation.SEND, Operation.STREAM):
        req: m.SendMessageRequest = request
        out: dict[str, Any] = {"message": message_to_v03(to_wire(req.message))}
        conf = req.configuration
        if conf is not None:
            c: dict[str, Any] = {"blocking": not conf.return_immediately}
            if conf.history_length is not None:
                c["historyLength"] = conf.history_length
            if conf.accepted_output_modes is not None:
                c["acceptedOutputModes"] = conf.accepted_output_modes
            if conf.task_push_notification_config is not None:
                c["pushNotificationConfig"] = push_config_to_v03(conf.task_push_notification_config)[
                    "pushNotificationConfig"
                ]
            out["configuration"] = c
        if req.metadata is not None:
            out["metadata"] = req.metadata
        return out
    if op is Operation.LIST:
        data = to_wire(request)
        if "status" in data:
            data["status"] = STATE_TO_V03[m.TaskState(data["status"])]
        return data
    if op is Operation.PUSH_SET:
        return push_config_to_v03(request)
    if op in (Operation.PUSH_GET, Operation.PUSH_DELETE):
        return {"id": request.task_id, "pushNotificationConfigId": request.id}
    if op is Operation.PUSH_LIST:
        return {"id": request.task_id}
    data = to_wire(request)
    data.pop("tenant", None)
    return data


def to_canonical_dict(obj: Any, path: str = "result") -> Any:
    """Client side: a 0.3 event/task/message dict as a 1.0-shaped dict."""
    obj = _obj(obj, path)
    kind = obj.get("kind")
    if kind == "message":
        out = message_from_v03(obj, path)
        return {"message": out}
    if kind == "task":
        return {"task": _task_from_v03(obj, path)}
    if kind == "status-update":
        out = {k: v for k, v in obj.items() if k not in ("kind", "final")}
        out["status"] = _status_from_v03(obj.get("status"), f"{path}.status")
        return {"statusUpdate": out}
    if kind == "artifact-update":
        out = {k: v for k, v in obj.items() if k != "kind"}
        out["artifact"] = _artifact_from_v03(obj.get("artifact"), f"{path}.artifact")
        return {"artifactUpdate": out}
    raise _bad(f"{path}.kind", f"unknown result kind {kind!r}")


def _status_from_v03(status: Any, path: str) -> dict[str, Any]:
    status = _obj(status, path)
    out = dict(status)
    state = status.get("state")
    if not isinstance(state, str) or state not in STATE_FROM_V03:
        raise _bad(f"{path}.state", f"unknown task state {state!r}"[:200])
    out["state"] = STATE_FROM_V03[state]
    if status.get("message") is not None:
        out["message"] = message_from_v03(status["message"], f"{path}.message")
    return out


def _artifact_from_v03(art: Any, path: str) -> dict[str, Any]:
    art = _obj(art, path)
    out = dict(art)
    out["parts"] = [part_from_v03(p, f"{path}.parts[{i}]") for i, p in enumerate(art.get("parts") or [])]
    return out


def _task_from_v03(task: dict[str, Any], path: str) -> dict[str, Any]:
    out = {k: v for k, v in task.items() if k != "kind"}
    out["status"] = _status_from_v03(task.get("status"), f"{path}.status")
    if task.get("history") is not None:
        out["history"] = [message_from_v03(x, f"{path}.history[{i}]") for i, x in enumerate(task["history"])]
    if task.get("artifacts") is not None:
        out["artifacts"] = [_artifact_from_v03(a, f"{path}.artifacts[{i}]") for i, a in enumerate(task["artifacts"])]
    return out


def decode_result(op: Operation, data: Any) -> Any:
    """Client side: the canonical value of a unary 0.3 result."""
    from parley.protocol import v1_0

    if op in (Operation.SEND, Operation.STREAM, Operation.SUBSCRIBE):
        return v1_0.decode_stream_event(to_canonical_dict(data))
    if op in (Operation.GET, Operation.CANCEL):
        return from_wire(_task_from_v03(_obj(data, "result"), "result"), m.Task, what="result")
    if op is Operation.LIST:
        d = dict(_obj(data, "result"))
        d["tasks"] = [_task_from_v03(_obj(t, "result.tasks"), "result.tasks") for t in d.get("tasks") or []]
        return from_wire(d, m.ListTasksResponse, what="result")
    if op in (Operation.PUSH_SET, Operation.PUSH_GET):
        return _push_config_from_result(data)
    if op is Operation.PUSH_LIST:
        items = data if isinstance(data, list) else []
        return m.ListTaskPushConfigsResponse(configs=[_push_config_from_result(c) for c in items])
    return data


def _push_config_from_result(data: Any) -> m.TaskPushNotificationConfig:
    d = _obj(data, "result")
    cfg = _push_config_from_v03(d.get("pushNotificationConfig"), d.get("taskId") or "", "result.pushNotificationConfig")
    return from_wire(cfg, m.TaskPushNotificationConfig, what="result")
