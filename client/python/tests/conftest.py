"""What the tests share: rigd's socket and its devices, from tests/pytest.rs (the harness
that serves rigd over the fake kernel in its own process and runs pytest)."""

import os

import pytest


@pytest.fixture
def socket() -> str:
    return os.environ["RIG_SOCKET"]


@pytest.fixture
def host_device() -> str:
    """A device whose pool holds shmem blocks: host memory, no GPU."""
    return os.environ["RIG_HOST_DEVICE"]


@pytest.fixture
def gpu_device() -> str:
    """A GPU rigd serves through its fake RM: GPU memory is real bookkeeping, but
    nothing ever runs (no release lands)."""
    return os.environ["RIG_GPU_DEVICE"]


@pytest.fixture
def cubin() -> bytes:
    """rig-cubin's fixture: kernels.cu by nvcc for sm_90."""
    with open(os.environ["RIG_CUBIN"], "rb") as f:
        return f.read()
