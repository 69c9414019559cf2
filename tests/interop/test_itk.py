"""The official interop kit's scenarios (a2a-itk), run against Parley's ITK agent (examples/itk).

The kit sends the first agent of a cluster one nested instruction that walks every directed edge of the
cluster once per transport (an Eulerian circuit, Hierholzer's algorithm), each hop calling the next agent
through its card on JSON-RPC, HTTP+JSON or gRPC; every hop adds a trace token, and the runner checks that all
tokens come back. Behaviours, as the kit names them: `send_message` (a send; streaming or not),
`push_notification` (each hop registers a webhook; every intermediate answer must reach it) and `resubscribe`
(each hop leaves its stream after the first event, resubscribes, and reads until the held task says
`task-finished`). The runner's first call goes to `/jsonrpc/`, and it reads answers from status Messages.

Here the cluster is three Parley ITK agents, each its own process (`python examples/itk/main.py --httpPort
P --grpcPort G`, as the kit starts an SDK's agent), and the runner below does what the kit's runner does
(testlib.py and test_suite/__init__.py of a2a-itk). A2A 1.0 §9 (JSON-RPC), §10 (gRPC), §11 (HTTP+JSON);
SubscribeToTask §3.1.6; push notifications §3.1.7 / §4.3.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from support import free_port, require, stop_process, wait_until_ready, webhook_receiver

require("grpc", "grpc")  # the ITK agent serves gRPC too, and calls over it

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "itk"
sys.path.insert(0, str(EXAMPLE))
from instruction import CONCAT, Instruction  # examples/itk is put on the path just above

END = "traversal-completed"
TRANSPORTS = ["jsonrpc", "http_json", "grpc"]
NAMES = ["parley_a", "parley_b", "parley_c"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Three ITK agents on 127.0.0.1: name -> base URL."""
    logs = tmp_path_factory.mktemp("itk")
    procs, urls = [], {}
    try:
        for name in NAMES:
            http, grpc = free_port(), free_port()
            log = (logs / f"{name}.log").open("w")
            proc = subprocess.Popen([sys.executable, "main.py", "--httpPort", str(http), "--grpcPort", str(grpc)],
                                    cwd=EXAMPLE, stdout=log, stderr=subprocess.STDOUT)
            procs.append((proc, log))
            urls[name] = f"http://127.0.0.1:{http}"
            wait_until_ready(proc, urls[name], 60, output=lambda path=log.name: Path(path).read_text())
        yield urls
    finally:
        for proc, log in procs:
            stop_process(proc)
            log.close()


def euler_circuit(nodes: list[str]) -> list[str]:
    """A circuit over every directed edge of the complete digraph on `nodes`, each once (Hierholzer)."""
    unused = {u: [v for v in reversed(nodes) if v != u] for u in nodes}
    stack, circuit = [nodes[0]], []
    while stack:
        if unused[stack[-1]]:
            stack.append(unused[stack[-1]].pop())
        else:
            circuit.append(stack.pop())
    return circuit[::-1]


def traversal(circuit: list[str], transport: str, urls: dict[str, str], behaviour: str, streaming: bool,
              notifications: str) -> tuple[Any, list[str]]:
    """The nested instruction that walks `circuit` on `transport`, and the tokens it must bring back."""
    hold = behaviour == "resubscribe"
    inst = Instruction()
    inst.return_response.response = f"{END}:{transport}"
    inst.return_response.hold_task = hold
    tokens = []
    for u, v in reversed(list(pairwise(circuit))):
        hop = Instruction()
        hop.steps.response_generator = CONCAT
        token = f"[{u} -> {v} ({transport})]"
        tokens.append(token)
        trace = hop.steps.instructions.add()
        trace.return_response.response = token
        trace.return_response.hold_task = hold
        call = hop.steps.instructions.add().call_agent
        call.agent_card_uri = urls[v]
        call.transport = transport
        call.streaming = streaming
        call.instruction.CopyFrom(inst)
        if behaviour == "push_notification":
            call.push_notification.url = notifications
        elif behaviour == "resubscribe":
            call.resubscribe.SetInParent()
        else:
            call.send_message.SetInParent()
        inst = hop
    return inst, [*tokens, f"{END}:{transport}"]


def scenario(urls: dict[str, str], behaviour: str, streaming: bool, notifications: str = "") -> tuple[Any, list[str]]:
    """One instruction covering every transport, as the kit's create_test_suite builds it."""
    whole = Instruction()
    whole.steps.response_generator = CONCAT
    expected: list[str] = []
    for transport in TRANSPORTS:
        inst, tokens = traversal(euler_circuit(NAMES), transport, urls, behaviour, streaming, notifications)
        whole.steps.instructions.add().CopyFrom(inst)
        expected.extend(tokens)
    return whole, expected


def payload(inst: Any, version: str, streaming: bool) -> dict:
    """The runner's JSON-RPC request: the instruction as bytes in a file part (0.3) or raw part (1.0)."""
    b64 = base64.b64encode(inst.SerializeToString()).decode()
    if version == "0.3":
        params = {"message": {"role": "user", "messageId": str(uuid.uuid4()), "kind": "message", "parts": [
            {"kind": "file", "file": {"bytes": b64, "mimeType": "application/x-protobuf", "name": "instruction.bin"}}]}}
        method = "message/stream" if streaming else "message/send"
    else:
        params = {"message": {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [
            {"raw": b64, "mediaType": "application/x-protobuf", "filename": "instruction.bin"}]}}
        method = "SendStreamingMessage" if streaming else "SendMessage"
    return {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}


def agent_texts(message: dict | None) -> list[str]:
    if not message or message.get("role") not in ("agent", "ROLE_AGENT"):
        return []
    return [p["text"] for p in message.get("parts", []) if p.get("text")]


def result_texts(result: dict) -> list[str]:
    """What the kit reads from an answer or an event: status messages (1.0 statusUpdate/task, 0.3 flat)."""
    for key in ("statusUpdate", "task"):
        if key in result:
            result = result[key]
    texts = agent_texts(result.get("status", {}).get("message"))
    return texts + [t for msg in result.get("history", []) for t in agent_texts(msg)]


def run(url: str, body: dict, version: str, streaming: bool, expected: list[str]) -> str:
    """Post the runner's first call to /jsonrpc/; the answer's text (a stream: read until every token is in)."""
    headers = {"A2A-Version": version}
    with httpx.Client(timeout=httpx.Timeout(15, read=120)) as http:
        if not streaming:
            answer = http.post(f"{url}/jsonrpc/", json=body, headers=headers)
            answer.raise_for_status()
            reply = answer.json()
            assert "error" not in reply, reply
            return "\n".join(result_texts(reply["result"]))
        seen: list[str] = []
        with http.stream("POST", f"{url}/jsonrpc/", json=body, headers=headers) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    frame = json.loads(line[5:])
                    assert "error" not in frame, frame
                    seen.extend(result_texts(frame["result"]))
                    if all(token in "\n".join(seen) for token in expected):
                        break
        return "\n".join(seen)


@pytest.mark.parametrize(("behaviour", "streaming", "version"), [
    ("send_message", False, "1.0"),
    ("send_message", False, "0.3"),
    ("send_message", True, "1.0"),
    ("send_message", True, "0.3"),
    ("resubscribe", True, "1.0"),
], ids=["send-1.0", "send-0.3", "stream-1.0", "stream-0.3", "resubscribe"])
def test_a_traversal_of_every_edge_on_every_transport_brings_back_every_trace_token(
        cluster: dict[str, str], behaviour: str, streaming: bool, version: str) -> None:
    inst, expected = scenario(cluster, behaviour, streaming)
    text = run(cluster[NAMES[0]], payload(inst, version, streaming), version, streaming, expected)
    missing = [token for token in expected if token not in text]
    assert missing == [], f"tokens missing from the answer: {missing}\n{text}"
    assert len(expected) == 3 * (len(NAMES) * (len(NAMES) - 1) + 1)  # 6 edges and the end, per transport


def test_push_notifications_of_every_hop_reach_the_webhook(cluster: dict[str, str]) -> None:
    """Each hop registers the kit's webhook with its call (and the runner with the first): every intermediate
    answer of every chain (the end token, then each trace token prepended) arrives as a notification."""
    with webhook_receiver().Webhook(path="/notifications") as hook:
        inst, expected = scenario(cluster, "push_notification", False, hook.base)
        body = payload(inst, "1.0", False)
        body["params"]["configuration"] = {"taskPushNotificationConfig": {"url": hook.url, "token": "runner"}}
        text = run(cluster[NAMES[0]], body, "1.0", False, expected)
        assert [token for token in expected if token not in text] == []
        states = []
        for chain in _chains(expected):
            state = chain[-1]
            states.append(state)
            for token in chain[:-1]:  # the innermost hop first (its answer is its token, then what it got)
                state = f"{token}\n{state}"
                states.append(state)

        def notified(got: list) -> list[str]:
            return [t for r in got for t in result_texts(r.json())]

        hook.wait_for(lambda got: all(any(s in t for t in notified(got)) for s in states),
                      "a notification of every intermediate answer")
        tokens = {r.headers.get("x-a2a-notification-token") for r in hook.received()}
        assert tokens == {"runner", "itk-token"}  # the runner's config, and the one each hop registered


def _chains(expected: list[str]) -> list[list[str]]:
    chains, current = [], []
    for token in expected:
        current.append(token)
        if token.startswith(f"{END}:"):
            chains.append(current)
            current = []
    return chains
