"""Property-based: whatever a client POSTs, the server answers with valid JSON-RPC, never a 500."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from srvkit import live, sse_lines

from parley.protocol import v0_3, v1_0
from parley.serve import default_app

STREAMING = ["message/stream", "tasks/resubscribe", "SendStreamingMessage", "SubscribeToTask"]
UNARY = [m for m in [*v0_3.METHODS, *v1_0.METHODS] if m not in STREAMING]
MAX_SSE_LINES = 2000
EXAMPLES = int(os.environ.get("PARLEY_FUZZ_EXAMPLES", "300"))  # raise it for a longer hunt


@pytest.fixture(scope="module")
def target():
    with live(default_app(None)) as srv, httpx.Client(base_url=srv.url, timeout=15) as client:
        yield client


# --- strategies -------------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
ids = st.integers() | st.text(max_size=10) | st.none() | st.booleans() | st.floats() | st.lists(st.integers(),
                                                                                            max_size=2)
methods = st.sampled_from(UNARY * 6 + STREAMING) | st.text(max_size=30)


def maybe(strategy):
    """A value, or a marker that the key is absent."""
    return st.just(...) | strategy


def obj(**fields) -> st.SearchStrategy[dict]:
    """A dict with some of `fields` (absent when the drawn value is ...)."""
    return st.fixed_dictionaries({k: maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not ...}
    )


texts = st.text(max_size=30)
part = obj(
    kind=st.sampled_from(["text", "file", "data", "image"]) | json_values,
    text=texts | json_values,
    file=obj(bytes=st.sampled_from(["aGVsbG8=", "***"]) | json_values, uri=texts, name=texts, mimeType=texts),
    data=json_values,
    raw=st.sampled_from(["aGVsbG8=", "!!"]) | json_values,
    url=texts | json_values,
    mediaType=texts,
    metadata=json_values,
)
message = obj(
    kind=st.just("message") | json_values,
    messageId=texts | json_values,
    role=st.sampled_from(["user", "agent", "ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"]) | json_values,
    parts=st.lists(part, max_size=3) | json_values,
    taskId=texts | json_values,
    contextId=texts | json_values,
    metadata=json_values,
)
params = obj(
    message=message | json_values,
    configuration=obj(blocking=st.booleans() | json_values, returnImmediately=st.booleans() | json_values,
                      historyLength=st.integers() | json_values, acceptedOutputModes=json_values),
    id=texts | json_values,
    historyLength=st.integers() | json_values,
    pageSize=st.integers() | json_values,
    pageToken=texts | json_values,
    contextId=texts,
    status=st.sampled_from(["completed", "TASK_STATE_COMPLETED", "working", "nope"]) | json_values,
    includeArtifacts=st.booleans() | json_values,
    taskId=texts | json_values,
    pushNotificationConfig=json_values,
    url=texts,
) | json_values
envelope = obj(jsonrpc=st.just("2.0") | json_values, id=ids, method=methods, params=params)

# Well-formed requests with plausible params for their method (so many get past validation).
good_ids = st.integers(min_value=-(2**31), max_value=2**31) | st.text(max_size=8)
task_ids = st.sampled_from(["", "nope", "00000000-0000-0000-0000-000000000000"]) | st.text(max_size=12)
text_03 = st.builds(lambda t: {"kind": "text", "text": t}, texts)
data_03 = st.builds(lambda d: {"kind": "data", "data": d}, st.dictionaries(st.text(max_size=5), scalars, max_size=3))
file_03 = st.builds(lambda u: {"kind": "file", "file": {"uri": u}}, texts)
text_10 = st.builds(lambda t: {"text": t}, texts)
data_10 = st.builds(lambda d: {"data": d}, json_values)
file_10 = st.builds(lambda u, n: {"url": u, "filename": n}, texts, texts)


def _message(v1: bool):
    parts = st.lists(text_10 | data_10 | file_10 if v1 else text_03 | data_03 | file_03, min_size=1, max_size=3)
    return obj(
        taskId=task_ids, contextId=st.text(max_size=8), metadata=st.dictionaries(st.text(max_size=5), scalars),
    ).flatmap(lambda extra: st.builds(
        lambda mid, role, ps: {
            **({} if v1 else {"kind": "message"}), "messageId": mid, "role": role, "parts": ps, **extra
        },
        st.text(min_size=1, max_size=10),
        st.sampled_from(["ROLE_USER"] * 5 + ["ROLE_AGENT"] if v1 else ["user"] * 5 + ["agent"]),
        parts,
    ))


def _params_for(method: str):
    v1 = method in v1_0.METHODS
    op = (v1_0.METHODS if v1 else v0_3.METHODS)[method].value
    if op in ("send", "stream"):
        conf = obj(historyLength=st.integers(-2, 5), **({"returnImmediately": st.booleans()} if v1
                                                         else {"blocking": st.booleans()}))
        return obj(configuration=conf, metadata=st.dictionaries(st.text(max_size=5), scalars)).flatmap(
            lambda extra: _message(v1).map(lambda msg: {"message": msg, **extra}))
    if op in ("get", "cancel", "subscribe"):
        return obj(historyLength=st.integers(-2, 5)).flatmap(
            lambda extra: task_ids.map(lambda t: {"id": t, **extra}))
    if op == "list":
        states = ["TASK_STATE_COMPLETED", "TASK_STATE_WORKING", "TASK_STATE_FAILED"] if v1 else \
            ["completed", "working", "input-required"]
        return obj(pageSize=st.integers(-1, 102), pageToken=st.text(max_size=12), historyLength=st.integers(-2, 4),
                   contextId=st.text(max_size=8), status=st.sampled_from(states), includeArtifacts=st.booleans(),
                   statusTimestampAfter=st.sampled_from(["2020-01-01T00:00:00Z", "yesterday"]))
    return params


def _good(method: str):
    v1 = method in v1_0.METHODS
    version = st.sampled_from(["1.0"] * 8 + [None, "1.2"]) if v1 else st.sampled_from([None] * 8 + ["0.3", "1.0"])
    return st.tuples(good_ids, _params_for(method), version).map(
        lambda t: ({"jsonrpc": "2.0", "id": t[0], "method": method, "params": t[1]}, t[2]))


good = st.sampled_from(UNARY * 4 + STREAMING).flatmap(_good)
versions = st.sampled_from([None, None, "1.0", "1.0", "0.3", "1", "1.0.5", "9.9", "x", ""])
# Mostly well-formed requests; then garbled envelopes, any JSON value, or raw bytes.
bodies = (
    good.map(lambda g: (g[0], json.dumps(g[0]).encode(), g[1]))
    | good.map(lambda g: (g[0], json.dumps(g[0]).encode(), g[1]))
    | st.tuples(envelope, versions).map(lambda t: (t[0], json.dumps(t[0]).encode(), t[1]))
    | st.tuples(json_values, versions).map(lambda t: (t[0], json.dumps(t[0]).encode(), t[1]))
    | st.tuples(st.binary(max_size=60), versions).map(lambda t: (None, t[0], t[1]))
)
paths = st.sampled_from(["/", "/", "/a2a/echo", "/a2a/interviewer"])


# --- checks -------------------------------------------------------------------------------------------


def _valid_id(rid: Any) -> bool:
    return rid is None or (isinstance(rid, (str, int)) and not isinstance(rid, bool))


def check_response(obj_: Any, sent: Any) -> None:
    assert isinstance(obj_, dict), obj_
    assert obj_.get("jsonrpc") == "2.0", obj_
    assert "id" in obj_, obj_
    assert ("result" in obj_) != ("error" in obj_), obj_
    sent_id = sent.get("id") if isinstance(sent, dict) else None
    if "error" in obj_:
        err = obj_["error"]
        event(f"error {err.get('code') if isinstance(err, dict) else err!r}")
        assert isinstance(err, dict), obj_
        assert isinstance(err.get("code"), int) and not isinstance(err.get("code"), bool), obj_
        assert isinstance(err.get("message"), str), obj_
        assert -32768 <= err["code"] <= -32000, obj_
        assert obj_["id"] is None or (_valid_id(sent_id) and obj_["id"] == sent_id), (sent, obj_)
    else:
        event("result")
        assert _valid_id(sent_id) and obj_["id"] == sent_id, (sent, obj_)


def check_sse(r: httpx.Response, sent: Any) -> None:
    frames, data = 0, []
    for n, line in enumerate(sse_lines(r)):
        assert n < MAX_SSE_LINES, "the stream did not end"
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            check_response(json.loads("\n".join(data)), sent)
            frames += 1
            data = []
    assert frames >= 1, "an SSE answer must carry at least one event"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, path=paths)
def test_any_post_gets_a_valid_json_rpc_answer(target, body, path):
    sent, raw, version = body
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    with target.stream("POST", path, content=raw, headers=headers) as r:
        assert r.status_code < 500, (r.status_code, raw)
        ctype = r.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            assert r.status_code == 200
            check_sse(r, sent)
            return
        r.read()
    assert ctype.startswith("application/json"), (ctype, r.text)
    assert r.status_code == 200, (r.status_code, r.text)
    check_response(r.json(), sent)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(min_size=1, max_size=200), version=st.sampled_from([None, "1.0"]))
def test_echo_streams_back_any_text(target, text, version):
    """Any text sent to echo comes back identical, in the stream chunks and in the snapshot."""
    if version:
        method, msg = "SendStreamingMessage", {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}
    else:
        method, msg = "message/stream", {"kind": "message", "messageId": "m", "role": "user",
                                         "parts": [{"kind": "text", "text": text}]}
    msg["messageId"] = f"fz-{hash((text, version))}-{id(text)}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": msg}}
    headers = {"A2A-Version": version} if version else {}
    chunks, task_id = [], None
    with target.stream("POST", "/", json=body, headers=headers) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for n, line in enumerate(sse_lines(r)):
            assert n < MAX_SSE_LINES
            if not line.startswith("data:"):
                continue
            res = json.loads(line[5:])["result"]
            ev = next(iter(res.values())) if version else res
            kind = next(iter(res)) if version else res["kind"]
            if kind == "task":
                task_id = ev["id"]
            if kind in ("artifactUpdate", "artifact-update"):
                chunks.append(ev["artifact"]["parts"][0]["text"])
    assert "".join(chunks) == text
    get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask" if version else "tasks/get", "params": {"id": task_id}}
    task = target.post("/", json=get, headers=headers).json()["result"]
    assert task["artifacts"][0]["parts"][0]["text"] == text
    assert task["history"][0]["parts"][0]["text"] == text
