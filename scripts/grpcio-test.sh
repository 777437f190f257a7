#!/usr/bin/env bash
# A stock gRPC client against rigd: makes a Python venv with the pinned grpcio,
# grpcio-reflection, grpcio-status and prometheus_client (client/tests/grpcio/
# requirements.txt) under the cache, then runs client/tests/grpcio.rs (every read-only
# RPC by reflection) and client/tests/metrics.rs (the metrics, parsed by
# prometheus_client's text parser) with it. A failed install fails this script:
# the test is never skipped. Kept between runs while the pins are the same.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

req=client/tests/grpcio/requirements.txt
pins=$(sha256sum "$req" | cut -c1-12)
venv=$RIG_CACHE/py/grpcio-$pins
if [ ! -f "$venv/.installed" ]; then
    rm -rf "$venv"
    mkdir -p "$RIG_CACHE/py"
    # Debian's python3 has no venv module without python3-venv.
    if ! python3 -m venv "$venv" 2>/dev/null; then
        rm -rf "$venv"
        apt_install python3-venv
        /usr/bin/python3 -m venv "$venv"
    fi
    # --no-deps: the file pins every package, so nothing unpinned comes in.
    "$venv/bin/pip" install --quiet --no-deps --require-virtualenv -r "$req"
    "$venv/bin/python" -c 'import grpc, grpc_reflection, grpc_status, google.protobuf, prometheus_client.parser'
    touch "$venv/.installed"
fi
"$venv/bin/python" -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
RIG_GRPCIO_PYTHON=$venv/bin/python cargo test -p rig-client --locked --test grpcio --test metrics -- --ignored
