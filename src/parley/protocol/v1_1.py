"""The A2A 1.1 dialect (dev-1.1 branch): the 1.0 dialect plus `generation` (section 3.2.7).

What 1.1 adds is carried by the canonical model (`Task.generation`, the events' `generation`,
`GetTaskRequest.currentGeneration`, `SendMessageConfiguration.ifGenerationMatch`); :mod:`parley.protocol.v1_0`
leaves it out of what 1.0 clients send and see, this dialect keeps it. Everything else (methods, routes, errors,
cards, push payloads) is 1.0's, so `VERSION` is the family, "1.0"; `PROTOCOL` is what was negotiated.
"""

from __future__ import annotations

from typing import Any

from parley.protocol import v1_0
from parley.protocol.codec import to_wire
from parley.protocol.operations import Operation
from parley.protocol.v1_0 import METHOD_OF, METHODS, REQUEST_TYPES, decode_result, decode_stream_event

VERSION = v1_0.VERSION  # every rule of 1.0 applies (server.service, cards, errors)
PROTOCOL = "1.1"

decode = v1_0.decode_1_1
encode_send_result = v1_0.encode_send_result_1_1
encode_event = v1_0.encode_event_1_1
encode_result = v1_0.encode_result_1_1


def encode_request(op: Operation, request: Any) -> Any:
    """Client side: a canonical request as 1.1 params (with `currentGeneration`, `ifGenerationMatch`)."""
    return to_wire(request)


__all__ = ["METHODS", "METHOD_OF", "PROTOCOL", "REQUEST_TYPES", "VERSION", "decode", "decode_result",
           "decode_stream_event", "encode_event", "encode_request", "encode_result", "encode_send_result"]
