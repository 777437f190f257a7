#!/usr/bin/env bash
# The Python package: packs the `rig-client` wheel from the release build's extension
# module (client/python/pack-wheel.py; tests/vm/build-guest.sh built it with the rest of
# the workspace), installs it into a venv with the pinned pytest
# (client/python/tests/requirements.txt, kept under the cache while the pins are the
# same), and runs client/python/tests/pytest.rs: pytest over client/python/tests against
# rigd over the fake kernel. A failed install fails this script: never skipped.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

TARGET=${CARGO_TARGET_DIR:-$RIG_ROOT/target}
so=$TARGET/release/lib_rig.so
[ -f "$so" ] || { echo "python-test: no $so (the release build makes it: tests/vm/build-guest.sh)" >&2; exit 1; }
venv=$(pinned_venv pytest client/python/tests/requirements.txt 'import pytest')
wheel=$(python3 client/python/pack-wheel.py --so "$so" --out "$TARGET/wheels")
"$venv/bin/pip" install --quiet --no-deps --force-reinstall --require-virtualenv "$wheel"
"$venv/bin/python" -c 'import rig; print("rig", rig.__version__, "from", rig.__file__)'
# --workspace, not -p: the same features as the test command's build, which it reuses.
RIG_PYTHON=$venv/bin/python cargo test --workspace --locked --test pytest -- --ignored
