"""tinygrad's own tests on RIG over the package's fake backend (test_tinygrad.py's
FakeBackend), no GPU: rig's device, queues and signals are real, every kernel does
nothing. scripts/tinygrad-own-fake.sh copies this file into tinygrad's test tree and
runs pytest there. Tests that check what a kernel computed fail by construction; the
ones that exercise signals, waits, timelines, copies and symbolic commands are the
point. Not a conftest here (its name), so the package's own pytest run never loads
it."""

import os
import sys

sys.path.insert(0, os.environ["RIG_FAKE_TESTS"])
os.environ.setdefault("RIG_GPU", "0000:00:06.0")
os.environ.setdefault("CACHELEVEL", "0")

import rig_gpu.tinygrad as rt  # noqa: E402
import test_tinygrad as fake  # noqa: E402

fake.FakeBackend.load = lambda self, lib: fake.FakeModule(fake._Every(lambda grid, block, args: None))
rt.RigDevice.backend_t = fake.FakeBackend
fake._nvrtc()
