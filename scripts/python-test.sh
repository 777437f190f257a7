#!/usr/bin/env bash
# The Python package: packs the `rig-gpu` wheel from the release build's extension
# module (client/python/pack-wheel.py; tests/vm/build-guest.sh built it with the rest of
# the workspace), installs it into a venv with the pinned pytest
# (client/python/tests/requirements.txt, kept under the cache while the pins are the
# same), and runs client/python/tests/pytest.rs: pytest over client/python/tests against
# rigd over the fake kernel. A failed install fails this script: never skipped. First,
# the wheel beside a stand-in of the index's `rig` (client/python/tests/standin.py):
# each imports, and removing either leaves the other whole.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$RIG_ROOT"

TARGET=${CARGO_TARGET_DIR:-$RIG_ROOT/target}
so=$TARGET/release/lib_rig.so
[ -f "$so" ] || { echo "python-test: no $so (the release build makes it: tests/vm/build-guest.sh)" >&2; exit 1; }
venv=$(pinned_venv pytest client/python/tests/requirements.txt 'import pytest')
wheel=$(python3 client/python/pack-wheel.py --so "$so" --out "$TARGET/wheels")
standin=$(python3 client/python/tests/standin.py "$TARGET/wheels")
pip() { "$venv/bin/pip" --quiet --require-virtualenv "$@"; }
py() { "$venv/bin/python" -c "$1" || { echo "python-test: beside the index's rig: $2" >&2; exit 1; }; }
# An older run's wheels out of the venv first (the venv is kept under the cache).
pip uninstall -y rig rig-client rig-gpu
pip install --no-deps --force-reinstall "$wheel" "$standin"
py 'import rig, rig_gpu; assert rig.WHOSE == "spinnaker"; rig_gpu.Session' "both import"
pip uninstall -y rig-gpu
py 'import rig; assert rig.WHOSE == "spinnaker"' "removing rig-gpu left the other's rig"
pip install --no-deps "$wheel"
pip uninstall -y rig
py 'import rig_gpu; rig_gpu.Session; import importlib.util as u; assert u.find_spec("rig") is None' \
  "removing the other's rig left rig_gpu whole"
"$venv/bin/python" -c 'import rig_gpu; print("rig_gpu", rig_gpu.__version__, "from", rig_gpu.__file__)'
# --workspace, not -p: the same features as the test command's build, which it reuses.
RIG_PYTHON=$venv/bin/python cargo test --workspace --locked --test pytest -- --ignored
