"""A2A 1.1 (dev-1.1 branch, 28491879) `generation` on the gRPC binding: `a2a-version: 1.1` metadata.

Section 3.2.7: Task.generation and the events' generation; section 3.2.2 / 5.4: ifGenerationMatch refused
with ABORTED (reason TASK_GENERATION_MISMATCH); GetTaskRequest.current_generation; a 1.0 call sees none of it.
"""

from __future__ import annotations

import uuid

from grpc_support import free_port

from support import grpc_error_infos, running

# isort: split
# (grpc_support first: without grpcio it skips this module, or fails it under CI=true)
import grpc
from google.rpc import error_details_pb2

from parley.agents.builtin import builtin_agents
from parley.app import Parley
from parley.grpc import a2a_pb2 as pb
from parley.grpc import a2a_pb2_grpc
from parley.settings import Settings

V10 = (("a2a-version", "1.0"),)
V11 = (("a2a-version", "1.1"),)


def user(text: str, task_id: str = "") -> pb.Message:
    return pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)], task_id=task_id)


def info_of(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    infos = grpc_error_infos(error)
    return infos[0] if infos else error_details_pb2.ErrorInfo()


def test_generation_over_grpc() -> None:
    """A 1.1 call reads the task's generation (>= 2 once it moved; 1.0 reads 0, the proto default: no field);
    a stream's events go up by exactly one each; a stale ifGenerationMatch is ABORTED and changes nothing;
    GetTask with a passed current_generation returns at once."""
    app = Parley(settings=Settings(db="memory", grpc_port=free_port()))
    for agent in builtin_agents():
        app.add_agent(agent)
    with running(app), grpc.insecure_channel(f"127.0.0.1:{app.settings.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        task = stub.SendMessage(pb.SendMessageRequest(tenant="interviewer", message=user("cats")), metadata=V11).task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED and task.generation >= 2, task
        plain = stub.GetTask(pb.GetTaskRequest(tenant="interviewer", id=task.id), metadata=V10)
        assert plain.generation == 0, plain
        stale = pb.SendMessageRequest(tenant="interviewer", message=user("because", task.id),
                                      configuration=pb.SendMessageConfiguration(if_generation_match=task.generation - 1))
        try:
            stub.SendMessage(stale, metadata=V11)
            raise AssertionError("a stale ifGenerationMatch was taken")
        except grpc.RpcError as exc:
            info = info_of(exc)
            assert exc.code() == grpc.StatusCode.ABORTED and info.reason == "TASK_GENERATION_MISMATCH", exc
            assert dict(info.metadata) == {"taskId": task.id, "expectedGeneration": str(task.generation - 1),
                                           "currentGeneration": str(task.generation)}, info
        same = stub.GetTask(pb.GetTaskRequest(tenant="interviewer", id=task.id, current_generation=task.generation - 1),
                            metadata=V11)
        assert (same.generation, same.status.state) == (task.generation, pb.TASK_STATE_INPUT_REQUIRED), same
        events = list(stub.SendStreamingMessage(pb.SendMessageRequest(tenant="echo", message=user("word " * 300)),
                                                metadata=V11))
        gens = [e.status_update.generation or e.artifact_update.generation for e in events[1:]]
        assert events[0].task.generation == 1 and gens == list(range(2, 2 + len(gens))) and len(gens) >= 3, gens
