"""The floor of the gRPC binding: a grpc.aio server whose SendMessage does no A2A work.

It answers every `lf.a2a.v1.A2AService/SendMessage` with the same prebuilt completed
echo task (the shape and size of what Parley's echo agent returns), so loadgen.py's
`--binding grpc` runs against it measure what grpc.aio itself costs per call on this
machine: HTTP/2 framing, the completion-queue poller thread, the asyncio integration and
protobuf (de)serialisation. Nothing is stored.

    python bench/grpc_floor_server.py --port 9103 [--loop uvloop|asyncio]
    python bench/loadgen.py 127.0.0.1:9103 --binding grpc -c 16 -d 10 --server-pid PID

Uses the a2a-sdk's generated messages; the loop defaults to uvloop, the loop uvicorn
(and so Parley's and the SDK's gRPC servers) runs on.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import uuid


def completed_task(pb, text: str):
    """A SendMessageResponse like Parley's echo answer: the user message in the history, the echoed text as one artifact."""
    task_id, context_id = str(uuid.uuid4()), str(uuid.uuid4())
    message = pb.Message(
        message_id="lg-0123456789ab-1",
        role=pb.ROLE_USER,
        parts=[pb.Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )
    status = pb.TaskStatus(state=pb.TASK_STATE_COMPLETED)
    status.timestamp.FromJsonString("2026-01-01T00:00:00.000Z")
    task = pb.Task(
        id=task_id,
        context_id=context_id,
        status=status,
        artifacts=[pb.Artifact(artifact_id=str(uuid.uuid4()), name="response", parts=[pb.Part(text=text)])],
        history=[message],
    )
    return pb.SendMessageResponse(task=task)


async def serve(host: str, port: int) -> None:
    import grpc
    import grpc.aio
    from a2a.types import a2a_pb2 as pb

    answer = completed_task(pb, "the quick brown fox jumps over the lazy dog and runs away")

    async def send_message(request, context):
        return answer

    handler = grpc.method_handlers_generic_handler(
        "lf.a2a.v1.A2AService",
        {
            "SendMessage": grpc.unary_unary_rpc_method_handler(
                send_message,
                request_deserializer=pb.SendMessageRequest.FromString,
                response_serializer=pb.SendMessageResponse.SerializeToString,
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"{host}:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(grace=0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9103)
    ap.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = ap.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(serve(args.host, args.port))
    else:
        asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
