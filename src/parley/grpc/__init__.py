"""A2A 1.0 over gRPC (the optional `parley-a2a[grpc]` extra).

    a2a_pb2.py, a2a_pb2.pyi, a2a_pb2_grpc.py   generated from proto/lf/a2a/v1/a2a.proto by
                                               scripts/gen_grpc.sh (do not edit)
    _pool.py                                   the private descriptor pool the generated code uses
    convert.py                                 protobuf <-> canonical model, through ProtoJSON

The server is :mod:`parley.server.grpc_server`, the client transport
:mod:`parley.client.grpc`. Importing this package needs grpcio, protobuf and
googleapis-common-protos.
"""
