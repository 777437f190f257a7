#!/usr/bin/env bash
# tinygrad's own test_hcq (tag v0.13.0, the pinned release) on RIG over the Python
# package's fake backend, no GPU: how a change to the device's queues or signals is
# checked against tinygrad's own HCQ tests before it reaches a GPU (docs/tinygrad.md,
# "Where it is tested"). Not part of the test command: it needs tinygrad's git tree,
# which no package carries (its sdist and wheel have no tests).
#
#     scripts/tinygrad-own-fake.sh TINYGRAD_GIT_DIR [GPUS] [pytest args...]
#
# GPUS: how many fake devices (RIG, RIG:1, …), 1 by default; 2 runs the multi-device
# tests too. Uses the wheel of the release build (as scripts/python-test.sh) in the
# pinned pytest venv.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"
git=$1
gpus=${2:-1}
shift $(($# < 2 ? $# : 2))
TARGET=${CARGO_TARGET_DIR:-$RIG_ROOT/target}
so=$TARGET/release/lib_rig.so
[ -f "$so" ] || { echo "tinygrad-own-fake: no $so (cargo build --release -p rig-python)" >&2; exit 1; }
venv=$(pinned_venv pytest client/python/tests/requirements.txt 'import pytest')
wheel=$(python3 client/python/pack-wheel.py --so "$so" --out "$TARGET/wheels")
"$venv/bin/pip" --quiet --require-virtualenv install --no-deps --force-reinstall "$wheel"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
git --git-dir="$git" archive v0.13.0 test extra/models pyproject.toml | tar -x -C "$tree"
cp client/python/tests/tinygrad_own_conftest.py "$tree/test/conftest.py"
addrs=$(seq 6 $((5 + gpus)) | xargs -I{} printf '0000:00:%02x.0,' {} | sed 's/,$//')
cd "$tree"
RIG_FAKE_TESTS="$RIG_ROOT/client/python/tests" RIG_GPU="$addrs" DEV=RIG \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE test/device/test_hcq.py "$@"
