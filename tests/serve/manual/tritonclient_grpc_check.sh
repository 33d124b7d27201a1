#!/usr/bin/env bash
# Manual check (not CI): builds grpc_fake_serve against build/libkiln_serve.a, starts it, and runs
# tritonclient_grpc_check.py in a throwaway venv (tritonclient[grpc], protobuf<7).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BUILD="${KILN_BUILD_DIR:-$ROOT/build}"
VENV="${VENV:-/tmp/tcvenv}"
PORT="${PORT:-18001}"
ninja -C "$BUILD" kiln_serve
c++ -std=c++20 -O1 -I"$ROOT/src" -I"$ROOT/include" -I"$BUILD/gen" \
    "$ROOT/tests/serve/manual/grpc_fake_serve.cc" -o "$BUILD/grpc_fake_serve" \
    "$BUILD/libkiln_serve.a" "$BUILD/libkiln_support.a" -lfmt $(pkg-config --libs grpc++ protobuf) -pthread
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "tritonclient[grpc]" "protobuf<7" numpy; }
"$BUILD/grpc_fake_serve" "$PORT" & pid=$!
trap 'kill $pid' EXIT
sleep 0.5
"$VENV/bin/python" "$ROOT/tests/serve/manual/tritonclient_grpc_check.py" "127.0.0.1:$PORT"
