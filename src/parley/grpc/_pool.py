"""A private protobuf descriptor pool for Parley's generated A2A code.

The official a2a-sdk registers the very same `lf.a2a.v1` types in protobuf's
default pool, under another file name; two registrations of one symbol make
the second import fail ("duplicate symbol"). Parley's generated `a2a_pb2`
therefore adds its file to this pool instead, so both can live in one process.
The pool also holds the files `a2a.proto` imports, copied from the default pool.
"""

from __future__ import annotations

from google.api import annotations_pb2, client_pb2, field_behavior_pb2
from google.protobuf import descriptor_pool, empty_pb2, struct_pb2, timestamp_pb2

POOL = descriptor_pool.DescriptorPool()

_added: set[str] = set()


def _add(file) -> None:
    if file.name in _added:
        return
    for dep in file.dependencies:
        _add(dep)
    POOL.AddSerializedFile(file.serialized_pb)
    _added.add(file.name)


for _module in (annotations_pb2, client_pb2, field_behavior_pb2, empty_pb2, struct_pb2, timestamp_pb2):
    _add(_module.DESCRIPTOR)
