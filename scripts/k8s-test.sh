#!/usr/bin/env bash
# rig-device-plugin against a Python kubelet stand-in, and its CDI specs against the CDI
# project's own Go library as Debian packages it (docs/k8s.md). Makes a Python venv with
# the pinned grpcio and grpcio-tools (client/device-plugin/tests/k8s/requirements.txt)
# under the cache, installs Debian's Go and CDI library, builds
# client/device-plugin/tests/k8s/cdi-validate.go OFFLINE (GOPATH mode over
# /usr/share/gocode: no module is fetched), builds rigctl (the specs' hooks; a crate of
# its own, so the test is told where it is), then runs client/device-plugin/tests/k8s.rs
# with all three. A failed install or build fails this script: the test is never
# skipped. The venv and the validator are kept between runs while their inputs
# are the same.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

venv=$(pinned_venv k8s client/device-plugin/tests/k8s/requirements.txt 'import grpc, grpc_tools.protoc, google.protobuf')
"$venv/bin/python" -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'

# Debian 12's CDI library (0.5.2: spec versions up to 0.5.0) and its Go (1.19).
cdi_pkg=golang-github-container-orchestrated-devices-container-device-interface-dev
apt_install golang-go "$cdi_pkg"
cdi_version=$(dpkg-query -W -f='${Version}' "$cdi_pkg")
src=client/device-plugin/tests/k8s/cdi-validate.go
tag=$(cat "$src" <(echo "$cdi_version") <(go version) | sha256sum | cut -c1-12)
bin=$RIG_CACHE/go/cdi-validate-$tag
if [ ! -x "$bin" ]; then
    mkdir -p "$RIG_CACHE/go/cache"
    work=$(mktemp -d)
    cp "$src" "$work/main.go"
    (cd "$work" && GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOPROXY=off \
        GOCACHE="$RIG_CACHE/go/cache" go build -o "$bin.tmp" main.go)
    mv "$bin.tmp" "$bin"
    rm -rf "$work"
fi
echo "cdi-validate built against $cdi_pkg $cdi_version with $(go version | cut -d' ' -f3)"

# rigctl as the test command's one debug build made it: `cargo test --workspace`, which
# builds every binary with the tests' features and reuses that build (a `cargo build`
# resolves other features and compiled the tree's upper half again: 37 s from nothing).
cargo test --workspace --locked --no-run
RIG_K8S_PYTHON=$venv/bin/python RIG_CDI_VALIDATE=$bin \
    RIGCTL_BIN=${CARGO_TARGET_DIR:-$RIG_ROOT/target}/debug/rigctl \
    cargo test --workspace --locked --test k8s -- --ignored --nocapture
