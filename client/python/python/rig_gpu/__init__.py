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

import asyncio
import os

from ._rig import (
    ARCH,
    DEFAULT_SOCKET,
    Closed,
    ClientError,
    CubinError,
    Done,
    Event,
    ExporterGone,
    Fault,
    Fence,
    GpuBuffer,
    Graph,
    HostBuffer,
    ImportedEvent,
    Kernel,
    KernelInfo,
    LaunchError,
    Module,
    Refused,
    Region,
    RigError,
    Runtime,
    Session,
    SharedEvent,
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
    "ExporterGone",
    "Fault",
    "Fence",
    "GpuBuffer",
    "Graph",
    "HostBuffer",
    "ImportedEvent",
    "Kernel",
    "KernelInfo",
    "LaunchError",
    "Module",
    "Refused",
    "Region",
    "RigError",
    "Runtime",
    "Session",
    "SharedEvent",
    "Timeout",
    "__version__",
    "devices",
    "inspect",
    "wait_async",
]


async def wait_async(rt: Runtime, done: Done, timeout: float | None = None) -> None:
    """Waits for `done` without blocking the event loop: the GPU raises its interrupt
    once the value lands, rigd signals the channel's wake descriptor, and the loop wakes
    this coroutine (rt.wake_fd). Where the channel has no wake descriptor it polls every
    millisecond. Raises rig.Fault as rt.wait does, and TimeoutError past `timeout`
    seconds."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    fd = rt.wake_fd(done)
    woken = asyncio.Event()
    if fd is not None:
        loop.add_reader(fd, woken.set)
    try:
        while not rt.done(done):
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError(f"{done!r} did not land within {timeout} s")
            if fd is None:
                await asyncio.sleep(0.001 if left is None else min(0.001, left))
                continue
            # A wake says only that something on the GPU landed: look again after it,
            # and at least every 50 ms.
            try:
                await asyncio.wait_for(woken.wait(), 0.05 if left is None else min(0.05, left))
            except TimeoutError:
                pass
            woken.clear()
            try:
                os.read(fd, 8)
            except BlockingIOError:
                pass
    finally:
        if fd is not None:
            loop.remove_reader(fd)
