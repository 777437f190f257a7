#!/usr/bin/env bash
# A stock gRPC client against rigd: makes a Python venv with the pinned grpcio,
# grpcio-reflection, grpcio-status and prometheus_client
# (client/rig-client/tests/grpcio/requirements.txt) under the cache, then runs
# client/rig-client/tests/grpcio.rs (every read-only RPC by reflection) and
# client/rig-client/tests/metrics.rs (the metrics, parsed by prometheus_client's text
# parser) with it. A failed install fails this script: the test is never skipped. Kept
# between runs while the pins are the same.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

venv=$(pinned_venv grpcio client/rig-client/tests/grpcio/requirements.txt \
    'import grpc, grpc_reflection, grpc_status, google.protobuf, prometheus_client.parser')
"$venv/bin/python" -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
# --workspace, not -p: the same features as the test command's build, which it reuses.
RIG_GRPCIO_PYTHON=$venv/bin/python cargo test --workspace --locked --test grpcio --test metrics -- --ignored
