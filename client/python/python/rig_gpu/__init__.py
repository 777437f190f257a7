"""rig from Python: GPU memory, kernel launches and copies through rigd.

rigd lends a GPU's channels and memory to unprivileged processes; this package is the
client library's Python face. A complete program::

    import rig_gpu as rig

    with rig.Session("0000:01:00.0") as s:
        rt = s.runtime()
        mod = rt.load(open("saxpy.sm_90.cubin", "rb").read())
        x = s.gpu_memory(4 * n)
        ...
        done = rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[n, 2.0, x, y])
        rt.wait(done)

docs/python.md in the repository describes every call.
"""

from ._rig import (
    ARCH,
    DEFAULT_SOCKET,
    Closed,
    ClientError,
    CubinError,
    Done,
    Event,
    Fault,
    GpuBuffer,
    HostBuffer,
    Kernel,
    KernelInfo,
    LaunchError,
    Module,
    Refused,
    Region,
    RigError,
    Runtime,
    Session,
    Timeout,
    __version__,
    devices,
    inspect,
)

__all__ = [
    "ARCH",
    "DEFAULT_SOCKET",
    "Closed",
    "ClientError",
    "CubinError",
    "Done",
    "Event",
    "Fault",
    "GpuBuffer",
    "HostBuffer",
    "Kernel",
    "KernelInfo",
    "LaunchError",
    "Module",
    "Refused",
    "Region",
    "RigError",
    "Runtime",
    "Session",
    "Timeout",
    "__version__",
    "devices",
    "inspect",
]
