#!/usr/bin/env bash
# Regenerate Parley's gRPC code from proto/lf/a2a/v1/a2a.proto:
#
#   src/parley/grpc/a2a_pb2.py, a2a_pb2.pyi, a2a_pb2_grpc.py
#
# The output depends on the protoc inside grpcio-tools, so this script runs a
# pinned grpcio-tools from its own virtualenv (created on first use, outside
# the repository) and gives the same bytes every time. 1.63.2 is the oldest
# release whose code needs only protobuf>=5 at run time (gencode 5.26.1 without
# a runtime version check; the stubs want grpcio>=1.63.2).
#
# Two edits follow protoc: imports point into the `parley.grpc` package, and
# the file is added to Parley's private descriptor pool (parley/grpc/_pool.py)
# rather than protobuf's default one, where a2a-sdk registers the same types.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_VERSION=1.63.2
PY=${PYTHON:-python3}
VENV=${PARLEY_GRPC_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/parley/grpc-tools-$TOOLS_VERSION}

if ! "$VENV/bin/python" -c "import grpc_tools, google.api" 2>/dev/null; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q "grpcio-tools==$TOOLS_VERSION" "googleapis-common-protos>=1.63,<2"
fi

SITE=$("$VENV/bin/python" -c "import google.api, os; print(os.path.dirname(os.path.dirname(google.api.__path__[0])))")
TOOLS_PROTO=$("$VENV/bin/python" -c "import grpc_tools, os; print(os.path.join(grpc_tools.__path__[0], '_proto'))")
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

"$VENV/bin/python" -m grpc_tools.protoc -I proto -I "$SITE" -I "$TOOLS_PROTO" \
  --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" lf/a2a/v1/a2a.proto

GEN="$OUT/lf/a2a/v1"
DEST=src/parley/grpc
"$VENV/bin/python" - "$GEN" "$DEST" <<'PY'
import pathlib
import sys

gen, dest = map(pathlib.Path, sys.argv[1:])


def edit(name, replacements):
    text = (gen / name).read_text()
    for old, new in replacements:
        if old not in text:
            sys.exit(f"gen_grpc.sh: {old!r} not found in the generated {name}; protoc's output changed")
        text = text.replace(old, new)
    (dest / name).write_text(text)


edit("a2a_pb2.py", [
    ("_sym_db = _symbol_database.Default()\n",
     "_sym_db = _symbol_database.Default()\n\n"
     "# Parley: a private pool, because a2a-sdk puts the same types in the default one.\n"
     "from parley.grpc._pool import POOL as _POOL\n"),
    ("DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(", "DESCRIPTOR = _POOL.AddSerializedFile("),
    ("'lf.a2a.v1.a2a_pb2'", "'parley.grpc.a2a_pb2'"),
])
edit("a2a_pb2_grpc.py", [
    ("from lf.a2a.v1 import a2a_pb2 as", "from parley.grpc import a2a_pb2 as"),
])
edit("a2a_pb2.pyi", [])
PY
echo "regenerated $DEST/a2a_pb2.py, a2a_pb2.pyi, a2a_pb2_grpc.py with grpcio-tools $TOOLS_VERSION"
