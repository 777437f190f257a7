"""tinygrad's device "RIG": tinygrad's hardware-command-queue layer (HCQ) on rig.

Importing this module registers the device with tinygrad; then ``DEV=RIG`` (or
``Tensor(..., device="RIG")``) runs tinygrad on a GPU that rigd lends, from an
unprivileged process::

    import rig_gpu.tinygrad  # registers RIG
    from tinygrad import Tensor
    x = Tensor.rand(4096, 4096, device="RIG")
    print((x @ x).sum().item())

How tinygrad's device maps onto rig (docs/tinygrad.md says more):

- memory: GPU buffers are the session's GPU memory (``Session.gpu_memory``); host
  buffers (staging, signals) are its host leases, which the process maps and the GPU
  reaches across PCIe;
- programs: tinygrad's CUDA renderer, compiled by NVRTC to sm_90 cubins (the device
  is not "CUDA", so tinygrad asks NVRTC for a cubin, not PTX), loaded with
  ``Runtime.load`` and launched with ``Runtime.launch``: rig builds the QMD and
  constant bank 0 itself;
- queues: a compute or copy queue records tinygrad's commands and replays them at
  submit on rig's runtime (launches on its compute channel, copies on its copy
  channel, or the copy kernel between two places in GPU memory);
- signals: 16 bytes of the session's host memory (value, then the GPU's time), written
  by the GPU where a queue sets them (rig's ``write_value``, once the work before is
  done) and by the host where tinygrad sets them. A wait between two commands on one
  channel costs nothing (the channel runs its work in order); a wait on work of the
  other channel is the GPU's (rig's ``after``: the channel acquires the other's
  value); a wait on a signal no known work sets (one the host sets later) is the GPU's
  acquire of the signal's memory (``wait_value``), so the host never holds a queue
  back. What the host reads settles through rig's wait (or poll) on the engine's own
  release, so work that faulted never reads as done: the wait raises instead. A
  timestamp is a rig event, the GPU's time;
- addresses: a host buffer's ``va_addr`` is its CPU address (tinygrad writes host
  buffers through it); kernels are given its GPU address.

Environment: ``RIG_GPU`` the GPUs' PCI addresses, comma-separated (``RIG:n`` is the
n-th; every GPU rigd serves that lends now, by default); ``RIG_SOCKET`` rigd's socket (``rig.DEFAULT_SOCKET``); ``RIG_RINGS`` ``auto``
(the default: in GPU memory where rigd lends them, else in host memory), ``host`` or
``gpu``; ``RIG_TIMEOUT`` seconds a wait may take (30); ``RIG_WAIT_POLICY`` how waits
spend that time (``spin``, ``yield``, ``block`` or ``spin_then_block``, the default,
which sleeps once a wait passed ``RIG_SPIN_S`` seconds, 0.2 as tinygrad's NV device
does: docs/python.md); ``RIG_CHAIN=0`` puts a WFI before
each launch queued back to back instead of chaining them through their QMDs (the
default); ``RIG_GRAPH=0`` replays TinyJit's kernels one by one instead of its batches
as rig graphs (``RigGraph``, the default); a graph's first launch goes at once and
the rest in doubling runs (``RIG_GRAPH_SUBMIT=early``, the default) or all in one
submission (``once``).

Built against tinygrad 0.13.0 (``TINYGRAD``): HCQ is tinygrad's internal interface and
changes between releases, and tinygrad's main branch can keep a version number while it
does, so at import the module checks the parts of HCQ it uses (``_NEEDS``: each
callable and its parameters) and refuses a tinygrad that differs, naming what differs,
unless ``RIG_TINYGRAD_ANY=1``.

``python -m rig_gpu.tinygrad prog.py [args]`` runs an unmodified tinygrad program on RIG:
the device is registered and ``DEV`` defaults to ``RIG``.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import importlib.metadata
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Protocol

import rig_gpu as rig

TINYGRAD = "0.13.0"

# What this module needs of tinygrad's HCQ layer, as tinygrad 0.13.0 has it: each
# callable it calls or overrides, the parameters it passes by position (in order) and
# by name. tinygrad's main branch can keep a version number while HCQ changes, and
# tinygrad is often installed from source, so the interface is checked, not the
# version string.
_NEEDS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("tinygrad.runtime.support.hcq", "HCQCompiled.__init__",
     ("device", "allocator", "compilers", "runtime", "signal_t", "comp_queue_t", "copy_queue_t"),
     ("kernargs_size", "arch")),
    ("tinygrad.runtime.support.hcq", "HCQProgram.__init__", ("args_state_t", "dev", "name"), ("kernargs_alloc_size", "lib")),
    ("tinygrad.runtime.support.hcq", "HCQProgram.__call__", (), ("global_size", "local_size", "vals", "wait", "timeout")),
    ("tinygrad.runtime.support.hcq", "HCQBuffer.__init__", ("va_addr", "size"), ("meta", "view", "owner")),
    ("tinygrad.runtime.support.hcq", "HCQSignal.__init__", ("base_buf",), ("value", "owner", "is_timeline", "timestamp_divider")),
    ("tinygrad.runtime.support.hcq", "HCQAllocator._alloc", ("size", "options"), ()),
    ("tinygrad.runtime.support.hcq", "HCQAllocator._map", ("buf",), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.wait", ("signal", "value"), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.signal", ("signal", "value"), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.timestamp", ("signal",), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.exec", ("prg", "args_state", "global_size", "local_size"), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.copy", ("dest", "src", "copy_size"), ()),
    ("tinygrad.runtime.support.hcq", "HWQueue.submit", ("dev", "var_vals"), ()),
    ("tinygrad.runtime.support.hcq", "MMIOInterface.__init__", ("addr", "nbytes"), ()),
    ("tinygrad.runtime.support.hcq", "HCQArgsState", (), ()),
    ("tinygrad.device", "BufferSpec", (), ()),
    ("tinygrad.helpers", "mv_address", ("mv",), ()),
    ("tinygrad.uop.ops", "sym_infer", (), ()),
    ("tinygrad.renderer.cstyle", "CUDARenderer", (), ()),
    ("tinygrad.engine.jit", "GraphRunner.__init__", ("linear", "input_uops"), ()),
    ("tinygrad.engine.jit", "GraphRunner.__call__", ("input_uops", "var_vals"), ("wait",)),
    ("tinygrad.engine.jit", "GraphRunner.updated_vars", ("var_vals",), ()),
    ("tinygrad.engine.jit", "GraphRunner.updated_launch_dims", ("var_vals",), ()),
)


def _interface_differences() -> list[str]:
    """What differs between the installed tinygrad's HCQ and `_NEEDS`, one line each."""
    import importlib
    import inspect

    out = []
    for module, path, positional, named in _NEEDS:
        try:
            obj: Any = importlib.import_module(module)
            for part in path.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            out.append(f"{module}.{path} is missing")
            continue
        if not (positional or named):
            continue
        try:
            params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        except (TypeError, ValueError):
            out.append(f"{module}.{path} has no signature to check")
            continue
        names = [p.name for p in params]
        if names[: len(positional)] != list(positional):
            out.append(f"{path} takes ({', '.join(names)}), rig passes ({', '.join(positional)}) first")
        missing = [n for n in named if n not in names]
        if missing:
            out.append(f"{path} has no parameter {', '.join(missing)}")
    return out


def _tinygrad_version() -> str:
    try:
        return importlib.metadata.version("tinygrad")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
        return "without package metadata"


if os.environ.get("RIG_TINYGRAD_ANY") != "1" and (_differs := _interface_differences()):
    raise ImportError(
        f"rig_gpu.tinygrad needs tinygrad's HCQ interface as tinygrad {TINYGRAD} has it; the installed "
        f"tinygrad ({_tinygrad_version()}) differs: " + "; ".join(_differs)
        + f" (pip install tinygrad=={TINYGRAD}, or RIG_TINYGRAD_ANY=1 to try it anyway)"
    )

from tinygrad.device import BufferSpec, Device  # noqa: E402
from tinygrad.engine.jit import GraphRunner  # noqa: E402
from tinygrad.dtype import dtypes  # noqa: E402
from tinygrad.helpers import ALLOW_TF32, PROFILE, getenv, mv_address  # noqa: E402
from tinygrad.uop.ops import sym_infer  # noqa: E402
from tinygrad.renderer.cstyle import CUDARenderer  # noqa: E402
from tinygrad.runtime.support.hcq import (  # noqa: E402
    HCQAllocator,
    HCQArgsState,
    HCQBuffer,
    HCQCompiled,
    HCQProgram,
    HCQSignal,
    HWQueue,
    MMIOInterface,
)

# The SM of the cubins rig loads (rig-cubin's, from the GPU generation rig serves).
ARCH = rig.ARCH


class RigCUDARenderer(CUDARenderer):
    """tinygrad's CUDA C renderer, for the RIG device (tinygrad names it "CUDA" here:
    `DEV=RIG:CUDA`). tinygrad keeps TF32 tensor cores out of float32 matmuls unless
    ALLOW_TF32=1, so that float32 stays float32's precision, but decides it by the
    device's name (CUDA or NV); the RIG device keeps the same rule here. Without it,
    tinygrad's own float32 gemm tests fail on RIG by TF32's error (seen on the H200,
    docs/tinygrad.md)."""

    @property  # type: ignore[override]
    def tensor_cores(self):
        return [tc for tc in self._tensor_cores if ALLOW_TF32 or tc.dtype_in != dtypes.float]

    @tensor_cores.setter
    def tensor_cores(self, tcs) -> None:
        self._tensor_cores = tcs


class Done(Protocol):
    """What a backend's copy or launch returns (``rig.Done``)."""

    engine: str
    value: int


class Backend(Protocol):
    """What the device needs of rig: one session and its runtime. ``RigBackend`` is
    rig itself; the package's tests put a fake in its place."""

    def gpu(self, size: int) -> tuple[Any, int]: ...
    def host(self, size: int) -> tuple[Any, int, int]: ...
    def free(self, mem: Any) -> None: ...
    def find(self, va: int) -> Any: ...
    def find_host(self, addr: int) -> Any: ...
    def copy(self, dst_va: int, src_va: int, size: int, after: list[Done]) -> Done: ...
    def load(self, lib: bytes) -> Any: ...
    def launch(self, kernel: Any, grid: tuple, block: tuple, args: list, after: list[Done]) -> Done: ...
    def poll(self, done: Done) -> bool: ...
    def wait(self, done: Done, timeout: float) -> None: ...
    def record(self, engine: str, after: list[Done]) -> Any: ...
    def event_time(self, event: Any, timeout: float) -> int: ...
    def write_value(self, engine: str, va: int, value: int, after: list[Done]) -> Done: ...
    def wait_value(self, engine: str, va: int, value: int) -> Done: ...
    def hold(self) -> None: ...
    def submit(self) -> None: ...
    def graph(self) -> Any: ...
    def replay(self, graph: Any, after: list[Done], submit: str) -> Done: ...
    def close(self) -> None: ...


class RigBackend:
    """A rig session on one GPU and its runtime (a compute and a copy channel)."""

    def __init__(self, gpu: str, socket: str, rings: str, timeout: float):
        self.session = rig.Session(gpu, socket=socket)
        try:
            self.runtime = self._runtime(timeout, rings)
            # tinygrad's own NV device spins on its signals and sleeps only once a wait
            # passed 200 ms (ops_nv.py, NVSignal._sleep), as CUDA's default spins with
            # CPUs to spare: the same here, spin then block after RIG_SPIN_S seconds.
            policy = os.environ.get("RIG_WAIT_POLICY", "spin_then_block")
            self.runtime.wait_policy = policy
            if policy == "spin_then_block":
                self.runtime.spin_then_block_s = float(os.environ.get("RIG_SPIN_S", "0.2"))
            if (chain := os.environ.get("RIG_CHAIN")) is not None:
                self.runtime.chain = chain != "0"
        except BaseException:
            self.session.close()
            raise

    def _runtime(self, timeout: float, rings: str) -> Any:
        """The session's runtime, its rings where `rings` says: `auto`, in GPU memory
        where rigd lends them to this process (root, `[channels] gpu_rings_group`),
        else in host memory."""
        if rings != "auto":
            return self.session.runtime(timeout=timeout, gpu_rings=rings == "gpu")
        try:
            return self.session.runtime(timeout=timeout, gpu_rings=True)
        except rig.Refused as e:
            if e.reason != "gpu_rings_refused":
                raise
            return self.session.runtime(timeout=timeout, gpu_rings=False)

    def gpu(self, size: int) -> tuple[Any, int]:
        b = self.session.gpu_memory(size, align=256)
        return b, b.va

    def host(self, size: int) -> tuple[Any, int, int]:
        b = self.session.host(size, align=4096)
        with memoryview(b) as mv:
            # The address only: the view ends here, so free() is not refused later.
            addr = mv_address(mv)
        return b, b.va, addr

    def free(self, mem: Any) -> None:
        mem.free()

    def find(self, va: int) -> Any:
        return self.session.find(va)

    def find_host(self, addr: int) -> Any:
        return self.session.find_host(addr)

    def copy(self, dst_va: int, src_va: int, size: int, after: list[Done]) -> Done:
        if not after:
            return self.runtime.copy(dst_va, src_va, size)
        return self.runtime.copy(dst_va, src_va, size, 0, 0, after)

    def load(self, lib: bytes) -> Any:
        return self.runtime.load(lib)

    def launch(self, kernel: Any, grid: tuple, block: tuple, args: list, after: list[Done]) -> Done:
        # Positional, and no list when nothing is waited for: the per-launch path.
        if not after:
            return self.runtime.launch(kernel, grid, block, args)
        return self.runtime.launch(kernel, grid, block, args, 0, after)

    def poll(self, done: Done) -> bool:
        return self.runtime.done(done)

    def wait(self, done: Done, timeout: float) -> None:
        self.runtime.wait(done, timeout=timeout)

    def record(self, engine: str, after: list[Done]) -> Any:
        return self.runtime.record(engine, after) if after else self.runtime.record(engine)

    def event_time(self, event: Any, timeout: float) -> int:
        return self.runtime.event_time(event, timeout=timeout)

    def write_value(self, engine: str, va: int, value: int, after: list[Done]) -> Done:
        # With the GPU's time after the value: tinygrad's signal layout.
        return self.runtime.write_value(va, value, engine, 0, True, after)

    def wait_value(self, engine: str, va: int, value: int) -> Done:
        return self.runtime.wait_value(va, value, engine)

    def hold(self) -> None:
        self.runtime.hold()

    def submit(self) -> None:
        self.runtime.submit()

    def graph(self) -> Any:
        return rig.Graph()

    def replay(self, graph: Any, after: list[Done], submit: str) -> Done:
        return self.runtime.replay(graph, after, submit)

    def close(self) -> None:
        try:
            self.runtime.close()
        finally:
            self.session.close()


@dataclass
class _Pending:
    """A signal's value once `done` lands (at once when `done` is None)."""

    backend: Backend | None
    done: Done | None
    value: int


def _device_error(e: rig.RigError) -> RuntimeError:
    """A rig error as tinygrad expects a device's: a RuntimeError, which tinygrad's
    synchronize keeps as the device's error state; the typed rig exception (its
    `fault`, `reason`) is the cause."""
    return RuntimeError(f"RIG: {type(e).__name__}: {e}")


def _poll(backend: Backend, done: Done) -> bool:
    try:
        return backend.poll(done)
    except rig.RigError as e:
        raise _device_error(e) from e


def _wait(backend: Backend, done: Done, timeout_s: float) -> None:
    try:
        backend.wait(done, timeout_s)
    except rig.RigError as e:
        raise _device_error(e) from e


def _write_value(backend: Backend, engine: str, va: int, value: int) -> Done:
    """`engine`'s channel writes `value` at `va` after its earlier work."""
    try:
        return backend.write_value(engine, va, value, [])
    except rig.RigError as e:
        raise _device_error(e) from e


def _landed(p: _Pending) -> bool:
    return p.done is None or p.backend is None or _poll(p.backend, p.done)


class RigSignal(HCQSignal):
    """A tinygrad signal: 16 bytes of a host lease of its device's session, the value
    and then the GPU's time, as tinygrad lays signals out.

    Who writes it: the GPU, where a queue's `signal` command sets it (rig's
    `write_value` on the channel, once the work before it is done); the host, where
    tinygrad sets `value`. The device's own launches issued in place (`RigProgram`,
    `RigGraph`) set its timeline without writing the memory, unless a GPU waits on
    that memory (`_wanted`). What the host reads is the larger of the memory and the
    values of the GPU work known to set it that has landed (`_pending`, settled in
    order by rig's wait or poll on the engine's own release), so work that faulted
    never reads as done: the wait raises the fault instead."""

    def __init__(self, *args: Any, **kwargs: Any):
        self._v = 0
        self._pending: collections.deque[_Pending] = collections.deque()
        # The memory's 64-bit value word, in this process (None: a symbolic signal).
        self._word: ctypes.c_uint64 | None = None
        # The largest value written to the memory, or queued to be (by the host or a
        # channel), and the largest a GPU acquire of the memory waits for.
        self._written = 0
        self._wanted = 0
        # (backend, event) whose GPU time is this signal's timestamp, or None.
        self._stamp_event: tuple[Backend, Any] | None = None
        self._stamp_ns = 0
        base = kwargs.get("base_buf", args[0] if args else None)
        if base is not None and isinstance(base.va_addr, int):
            self._word = ctypes.c_uint64.from_address(base.va_addr)
        super().__init__(*args, **kwargs)

    def _settle(self) -> None:
        while self._pending and _landed(self._pending[0]):
            self._v = self._pending.popleft().value

    def _memory(self) -> int:
        return 0 if self._word is None else self._word.value

    @property
    def value(self) -> int:
        self._settle()
        return max(self._v, self._memory())

    @value.setter
    def value(self, new_value: int) -> None:
        # The host sets it: a GPU acquire of the memory sees it at once.
        self._pending.clear()
        self._v = self._written = new_value
        self._wanted = 0
        if self._word is not None:
            self._word.value = new_value

    def _set_after(self, backend: Backend, done: Done | None, value: int, written: bool = False) -> None:
        """`value` once `done` lands (at once when None and nothing is pending);
        `written`: the GPU writes it into the memory by then too."""
        if done is None and not self._pending:
            self.value = value
            return
        self._pending.append(_Pending(backend, done, value))
        if written:
            self._written = max(self._written, value)
        elif done is not None and self._wanted > self._written:
            # A GPU waits on the memory for a value nothing wrote yet: this one is
            # written too, behind the work that sets it.
            self._publish(backend, done, value)

    def _publish(self, backend: Backend, done: Done, value: int) -> None:
        """Has `done`'s channel write `value` into the memory once `done` landed; the
        pending entry then follows the write (`write_value`'s Done)."""
        va = _own_va(self, backend)
        if va is None:
            return
        w = _write_value(backend, done.engine, va, value)
        for p in self._pending:
            if p.done is done:
                p.done = w
        self._written = max(self._written, value)

    def _covering(self, value: int) -> list[_Pending] | None:
        """The pending entries up to the first that sets at least `value`; None when
        none does."""
        out = []
        for p in self._pending:
            out.append(p)
            if p.value >= value:
                return out
        return None

    def wait(self, value: int, timeout: int | None = None) -> None:
        timeout_ms = timeout or getenv("HCQDEV_WAIT_TIMEOUT_MS", 30000)
        deadline = time.perf_counter() + timeout_ms / 1000
        while self.value < value:
            if self._pending:
                # rig's wait returns at once for work that landed already.
                p = self._pending[0]
                if p.done is not None and p.backend is not None:
                    try:
                        p.backend.wait(p.done, max(deadline - time.perf_counter(), 0.0))
                    except rig.Timeout as e:
                        raise RuntimeError(f"Wait timeout: {timeout_ms} ms! (the signal is not set to {value}, but {self.value}): {e}") from e
                    except rig.RigError as e:
                        raise _device_error(e) from e
                self._pending.popleft()
                self._v = p.value
                continue
            # Nothing known sets it: the host (another thread) or a channel behind an
            # acquire writes the memory. A fault of the owner's channels ends the wait.
            if time.perf_counter() >= deadline:
                raise RuntimeError(f"Wait timeout: {timeout_ms} ms! (the signal is not set to {value}, but {self.value})")
            if isinstance(self.owner, RigDevice):
                self.owner.check()
            time.sleep(0.0002)

    def _stamp(self, backend: Backend, engine: str, after: list[Done]) -> None:
        """Records an event on `engine`'s channel: the GPU writes its timer there once
        the channel's earlier work, and `after` (the other channel's), are done."""
        try:
            self._stamp_event = (backend, backend.record(engine, after))
        except rig.RigError as e:
            raise _device_error(e) from e

    @property
    def timestamp(self):  # type: ignore[override]
        """When the work before the timestamp command was done, in microseconds of the
        GPU's timer (rig's events: docs/compute.md, "Events"), read once it landed."""
        if self._stamp_event is not None:
            backend, ev = self._stamp_event
            try:
                self._stamp_ns = backend.event_time(ev, getenv("HCQDEV_WAIT_TIMEOUT_MS", 30000) / 1000)
            except rig.RigError as e:
                raise _device_error(e) from e
            self._stamp_event = None
        return self._stamp_ns / self.timestamp_divider


def _own_va(sig: RigSignal, backend: Backend) -> int | None:
    """The GPU address of `sig`'s memory when it is memory of `backend`'s session (a
    signal of that device), else None."""
    owner = sig.owner
    if not isinstance(owner, RigDevice) or owner.backend is not backend:
        return None
    return owner.gpu_va(sig.base_buf)


def _follow(sig: RigSignal, value: int, deps: list[tuple[Backend, Done]]) -> bool:
    """A queue's wait for `sig` to reach `value` through the work known to set it:
    that work joins `deps`, which later commands follow. False when no such work sets
    it and it has not been reached."""
    if sig._v < value:
        sig._settle()
    if sig._v >= value:
        return True
    cover = sig._covering(value)
    if cover is None:
        return sig._memory() >= value
    deps.extend((c.backend, c.done) for c in cover if c.done is not None and c.backend is not None)
    return True


def _issue(dev: RigDevice, deps: list[tuple[Backend, Done]], engine: str | None, issue: Any) -> Done:
    """Issues a command on `engine` (None: either) after `deps`: it follows its own
    channel's earlier work by itself; the device's other channel's work is waited for
    by the GPU (rig's `after`: a semaphore acquire, no host round trip); another
    device's work on the host before it goes. Then it is the one thing later commands
    follow: it lands only after what it waited for."""
    be = dev.backend
    after = []
    for b, d in deps:
        if b is not be:
            _wait(b, d, dev.timeout)
        elif engine is None or d.engine != engine:
            after.append(d)
    try:
        done = issue(after)
    except rig.RigError as e:  # a fault of what it was to wait for too: the device's error
        raise _device_error(e) from e
    deps[:] = [(be, done)]
    return done


def _resolve(x: Any, var_vals: dict | None) -> int:
    """`x`, or the value tinygrad's symbolic `x` takes in `var_vals`."""
    return x if isinstance(x, int) else int(sym_infer(x, var_vals or {}))


@dataclass
class _Mem:
    """What a tinygrad buffer of the device holds in `HCQBuffer.meta`: the rig memory
    and its GPU address. A host buffer's `va_addr` is its CPU address (tinygrad writes
    host and cpu_access buffers through it); a GPU buffer's is its GPU address."""

    mem: Any
    gpu_va: int
    host: bool


class _Queue(HWQueue):
    """tinygrad's commands, recorded; `_submit` replays them on the device's runtime.

    Ordering: `deps` are the GPU work every later command must follow. A command on a
    channel follows that channel's earlier work by itself; the GPU waits for work of
    the other channel (`_issue`). A `wait` follows the work known to set its signal,
    or, when nothing known sets it yet (the host will, or a queue submitted later on
    the other channel), the queue's channel acquires the signal's memory on the GPU
    (`wait_value`): the host never holds a queue back. A `signal` is written into the
    signal's memory by the channel of the last of `deps` once it is done. Values,
    sizes, signals and buffers may be symbolic (tinygrad's `Variable`s), resolved from
    `submit`'s `var_vals`: a symbolic signal is its memory, found by its address.
    """

    kind = ""

    def __init__(self) -> None:
        super().__init__()
        self._ops: list[tuple] = []
        self._var_vals: dict | None = None

    def wait(self, signal: RigSignal, value):  # type: ignore[override]
        self._ops.append(("wait", signal, value))
        return self

    def signal(self, signal: RigSignal, value):  # type: ignore[override]
        self._ops.append(("signal", signal, value))
        return self

    def timestamp(self, signal: RigSignal):  # type: ignore[override]
        self._ops.append(("timestamp", signal))
        return self

    def memory_barrier(self):
        # Each launch's QMD invalidates the caches it reads and its release makes its
        # writes visible; copies complete by the copy engine's own release.
        return self

    def submit(self, dev: RigDevice, var_vals: dict[str, int] | None = None):  # type: ignore[override]
        self._var_vals = var_vals
        self._submit(dev)
        return self

    def _submit(self, dev: RigDevice) -> None:
        # One submission per channel for the queue's commands: the GPU then runs a
        # timestamp, a kernel and the next timestamp back to back, not as the host
        # reaches each.
        dev.backend.hold()
        try:
            self._run(dev, dev.after(self.kind), self._var_vals)
        except BaseException:
            # What was queued still goes; the error in flight is the one to see.
            with contextlib.suppress(Exception):
                dev.backend.submit()
            raise
        dev.backend.submit()
        dev.reap()

    def _run(self, dev: RigDevice, deps: list[tuple[Backend, Done]], vv: dict | None) -> None:
        be = dev.backend
        for op in self._ops:
            kind = op[0]
            if kind == "wait":
                self._await(dev, dev.signal_at(op[1], vv), _resolve(op[2], vv), deps)
            elif kind == "signal":
                self._settle_deps(deps, dev)
                self._set(dev, dev.signal_at(op[1], vv), _resolve(op[2], vv), deps)
            elif kind == "timestamp":
                sig = dev.signal_at(op[1], vv)
                if not isinstance(sig, RigSignal):
                    raise RuntimeError(f"RIG: a timestamp into {sig:#x}, which is no signal of {dev.device}")
                self._settle_deps(deps, dev)
                # On this queue's own channel: the time its engine reaches this point
                # (a record on another channel would time that channel's end). Work of
                # the other channel it follows is waited for by the GPU, as a command's
                # is (`after`); another device's on the host.
                if deps and deps[0][0] is not be:
                    _wait(deps[0][0], deps[0][1], dev.timeout)
                    deps.clear()
                sig._stamp(be, self.kind, [d for _, d in deps if d.engine != self.kind])
            else:
                _issue(dev, deps, *self._command(dev, op, vv))
        if deps and deps[-1][0] is be:
            dev.last_done[self.kind] = deps[-1][1]

    def _await(self, dev: RigDevice, sig: RigSignal | int, value: int, deps: list[tuple[Backend, Done]]) -> None:
        """The queue's wait for `sig` (a signal, or the GPU address of a signal's
        memory) to reach `value`."""
        if isinstance(sig, RigSignal):
            if _follow(sig, value, deps):
                return
            va = _own_va(sig, dev.backend)
            if va is None:
                # Another device's memory, which this session cannot reach: the host
                # waits for it before the queue goes on.
                sig.wait(value, int(dev.timeout * 1000))
                return
            sig._wanted = max(sig._wanted, value)
        else:
            va = sig
        try:
            done = dev.backend.wait_value(self.kind, va, value)
        except rig.RigError as e:
            raise _device_error(e) from e
        deps.append((dev.backend, done))

    def _set(self, dev: RigDevice, sig: RigSignal | int, value: int, deps: list[tuple[Backend, Done]]) -> None:
        """The queue's `signal`: `sig` (a signal, or the GPU address of a signal's
        memory) takes `value` once `deps` (at most one, settled) landed."""
        be = dev.backend
        if isinstance(sig, RigSignal):
            if not deps and sig._pending:
                last = sig._pending[-1]
                if last.backend is not be or last.done is None:
                    # After values another device's work sets: in their order, by the host.
                    sig._set_after(be, None, value)
                    return
                # After the values already pending on it, in their order.
                deps.append((be, last.done))
            if not deps:
                sig.value = value
                return
            b, d = deps[0]
            va = _own_va(sig, b)
            if va is None:  # another device's work: set when the host sees it land
                sig._set_after(b, d, value)
                return
        else:
            # Memory only: written by this queue's channel, after its earlier work
            # (another device's first waited for on the host).
            b, d, va = (deps[0][0], deps[0][1], sig) if deps else (be, None, sig)
            if b is not be:
                _wait(b, d, dev.timeout)
                b, d = be, None
        w = _write_value(b, d.engine if d is not None else self.kind, va, value)
        deps[:] = [(b, w)]
        if isinstance(sig, RigSignal):
            sig._set_after(b, w, value, written=True)

    def _command(self, dev: RigDevice, op: tuple, vv: dict | None) -> tuple[str | None, Any]:
        raise NotImplementedError(op[0])

    @staticmethod
    def _settle_deps(deps: list[tuple[Backend, Done]], dev: RigDevice) -> None:
        """Leaves at most one entry in `deps`: all but the last are waited for."""
        for b, d in deps[:-1]:
            _wait(b, d, dev.timeout)
        del deps[:-1]


def _launch_args(dev: RigDevice, bufs, vals, var_vals: dict | None = None) -> list[int]:
    """A launch's arguments as rig takes them: each buffer's GPU address, then the
    values."""
    return [dev.gpu_va(b, var_vals) for b in bufs] + [_resolve(v, var_vals) for v in vals]


class RigComputeQueue(_Queue):
    kind = "compute"

    def exec(self, prg: RigProgram, args_state: HCQArgsState, global_size, local_size):  # type: ignore[override]
        bufs, vals = args_state.bufs, args_state.vals
        fixed = all(isinstance(b.va_addr, int) for b in bufs) and all(
            isinstance(x, int) for x in (*vals, *global_size, *local_size)
        )
        if fixed:  # the launch as rig takes it, made once
            args = _launch_args(prg.dev, bufs, vals)
            self._ops.append(("exec", prg, None, args, tuple(global_size), tuple(local_size)))
        else:
            self._ops.append(("exec", prg, bufs, vals, global_size, local_size))
        return self

    def _command(self, dev, op, vv):
        _, prg, bufs, vals, global_size, local_size = op
        be, kernel = dev.backend, prg.kernel
        if bufs is None:
            return "compute", lambda after: be.launch(kernel, global_size, local_size, vals, after)
        args = _launch_args(dev, bufs, vals, vv)
        grid = tuple(_resolve(x, vv) for x in global_size)
        block = tuple(_resolve(x, vv) for x in local_size)
        return "compute", lambda after: be.launch(kernel, grid, block, args, after)


class RigCopyQueue(_Queue):
    kind = "copy"

    def copy(self, dest: HCQBuffer, src: HCQBuffer, copy_size):  # type: ignore[override]
        self._ops.append(("copy", dest, src, copy_size))
        return self

    def _command(self, dev, op, vv):
        _, dest, src, size = op
        (d, d_host), (s, s_host) = dev.locate(dest, vv), dev.locate(src, vv)
        size, be = _resolve(size, vv), dev.backend
        # rig copies on the copy engine whenever an end is host memory (the copy kernel
        # only between two places in GPU memory): then the engine is known.
        engine = "copy" if d_host or s_host else None
        return engine, lambda after: be.copy(d, s, size, after)


class RigProgram(HCQProgram):
    """A kernel of an NVRTC cubin, loaded into the session's GPU memory by rig."""

    def __init__(self, dev: RigDevice, name: str, lib: bytes, **kwargs: Any):
        self.dev, self.name, self.lib = dev, name, lib
        self.module = dev.backend.load(lib)
        self.kernel = self.module.kernel(name)
        super().__init__(HCQArgsState, dev, name, kernargs_alloc_size=0, lib=lib)

    def fill_kernargs(self, bufs, vals=(), kernargs=None) -> HCQArgsState:
        # rig lays the arguments into constant bank 0 at launch: no kernargs buffer.
        return HCQArgsState(kernargs, self, bufs, vals=vals)

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, timeout=None):
        """What HCQProgram queues (a wait for the timeline, the launch, the timeline's
        next value), done in place without building a queue: the same commands, a few
        microseconds less of Python per launch. Timed launches, profiling and a launch
        after a timeline value no known work sets take HCQ's own path."""
        dev = self.dev
        if (deps := dev.in_place(wait)) is None:
            return super().__call__(
                *bufs, global_size=global_size, local_size=local_size, vals=vals, wait=wait, timeout=timeout
            )
        args = _launch_args(dev, bufs, vals)
        be, kernel = dev.backend, self.kernel
        dev.placed(_issue(dev, deps, "compute", lambda after: be.launch(kernel, global_size, local_size, args, after)))
        dev.prof_exec_counter += 1
        return None


class RigGraph(GraphRunner):
    """TinyJit's graph on RIG: the batch's kernels recorded once into a `rig.Graph`
    (each one's kernel, launch shape and arguments, buffers as GPU addresses, laid out
    by rig when recorded) and replayed by one call (`Runtime.replay`), so a replayed
    launch costs no Python: the batch reaches the GPU in a few submissions (the first
    launch, then doubling runs; one with RIG_GRAPH_SUBMIT=once), each launch queued
    behind the one before in a run chaining through its QMD (rig's chained launches,
    docs/compute.md). A call patches only what changed: the JIT's input buffers, its
    variables and symbolic launch shapes (tinygrad's `GraphRunner` says which).
    Kernels only (`GraphRunner.supports_uop`): copies stay outside the batch. In the
    device's order like any launch: after the work the timeline names, setting its next
    value (`RigProgram.__call__`'s rules); with `wait`, the GPU's time from before the
    first kernel to after the last."""

    def __init__(self, linear, input_uops=()):
        super().__init__(linear, input_uops)
        self._record()

    def _record(self) -> None:
        """Records the launches from what `GraphRunner` found in the batch."""
        self.dev: RigDevice = Device[self.calls[0][2][0].device]
        zeros = {v: 0 for v in self.vars}
        # [kernel, grid, block, args]: args are the buffers' GPU addresses, then the
        # values; `nbufs` says where the values start. Kept beside the rig graph for
        # the batch as HCQ's own commands (`_queued`).
        self.launches: list[list] = []
        self.nbufs: list[int] = []
        self.programs: list[RigProgram] = []
        self.graph = self.dev.backend.graph()
        for (_, ast, bufs, device_vars), prg in zip(self.calls, self.runtimes):
            grid, block = ast.arg.launch_dims(zeros)
            args = [self.dev.gpu_va(b._buf) for b in bufs] + [device_vars.get(x.expr, 0) for x in ast.arg.vars]
            launch = [prg.kernel, tuple(grid), tuple(block or (1, 1, 1)), args]
            self.graph.add(*launch)
            self.launches.append(launch)
            self.nbufs.append(len(bufs))
            self.programs.append(prg)
        self.patched = [(j, reps) for j, reps in enumerate(self.uop_replace) if reps]

    def __call__(self, input_uops, var_vals, wait=False):  # type: ignore[override]
        dev, g = self.dev, self.graph
        for j, reps in self.patched:
            args = self.launches[j][3]
            for pos, iidx in reps:
                args[pos] = va = dev.gpu_va(input_uops[iidx].buffer._buf)
                g.set_arg(j, pos, va)
        for j, i, v in self.updated_vars(var_vals):
            self.launches[j][3][self.nbufs[j] + i] = v
            g.set_arg(j, self.nbufs[j] + i, v)
        for j, grid, block in self.updated_launch_dims(var_vals):
            self.launches[j][1], self.launches[j][2] = tuple(grid), tuple(block)
            g.set_dims(j, self.launches[j][1], self.launches[j][2])
        if (deps := dev.in_place(wait)) is None:
            return self._queued(wait)  # HCQ's own commands
        be = dev.backend
        dev.placed(_issue(dev, deps, "compute", lambda after: be.replay(g, after, dev.graph_submit)))
        return None

    def _queued(self, wait: bool) -> float | None:
        """The batch as one compute queue of HCQ's own commands (a wait for the
        timeline, the launches, the timeline's next value, and timestamps around them
        when timed), whose wait for the timeline the GPU does as any queue's."""
        dev = self.dev
        q = dev.hw_compute_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1)
        if wait:
            st, en = dev.new_signal(), dev.new_signal()
            q.timestamp(st)
        for prg, (_, grid, block, args) in zip(self.programs, self.launches):
            q._ops.append(("exec", prg, None, list(args), grid, block))  # args copied: later calls patch them
        if wait:
            q.timestamp(en)
        q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
        if not wait:
            return None
        dev.synchronize()
        return float(en.timestamp - st.timestamp) / 1e6


class RigAllocator(HCQAllocator):
    def __init__(self, dev: RigDevice):
        # 4 staging buffers of 16 MiB (64 MiB of host leases) rather than tinygrad's 32
        # of 2 MiB: fewer, longer copies. No transfers between rig devices (each is its
        # own session: another session's memory is refused) and no reads from disk into
        # staging by io_uring: both go through the host.
        super().__init__(dev, batch_size=16 << 20, batch_cnt=4, supports_transfer=False, supports_copy_from_disk=False)

    def _copyin(self, dest: HCQBuffer, src: memoryview) -> None:
        """tinygrad's staging loop (copies on the copy channel, each staging buffer
        reused once its last copy landed), the bytes moved into staging by libc's
        memcpy rather than a memoryview slice."""
        src = src.cast("B")
        if (src_addr := _address(src)) is None or PROFILE:
            return super()._copyin(dest, src)
        dev, size = self.dev, self.b[0].size
        for i in range(0, src.nbytes, size):
            self.b_next = (self.b_next + 1) % len(self.b)
            dev.timeline_signal.wait(self.b_timeline[self.b_next])
            lsize = min(size, src.nbytes - i)
            ctypes.memmove(self.b[self.b_next].va_addr, src_addr + i, lsize)
            dev.hw_copy_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1).copy(
                dest.offset(i), self.b[self.b_next], lsize
            ).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
            self.b_timeline[self.b_next] = dev.timeline_value - 1

    def _copyout(self, dest: memoryview, src: HCQBuffer) -> None:
        """Device to host through every staging buffer at once: the copy engine fills
        the next ones while the host copies out of the first (tinygrad's own loop waits
        for each copy before the host reads it)."""
        dest = dest.cast("B")
        if (dst_addr := _address(dest)) is None or PROFILE:
            return super()._copyout(dest, src)
        dev, size = self.dev, self.b[0].size
        dev.synchronize()
        inflight: collections.deque[tuple[int, int, int]] = collections.deque()

        def drain() -> None:
            at, lsize, k = inflight.popleft()
            dev.timeline_signal.wait(self.b_timeline[k])
            ctypes.memmove(dst_addr + at, self.b[k].va_addr, lsize)

        for i in range(0, dest.nbytes, size):
            if len(inflight) == len(self.b):
                drain()
            k = self.b_next = (self.b_next + 1) % len(self.b)
            lsize = min(size, dest.nbytes - i)
            dev.hw_copy_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1).copy(
                self.b[k], src.offset(i), lsize
            ).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
            self.b_timeline[k] = dev.timeline_value - 1
            inflight.append((i, lsize, k))
        while inflight:
            drain()

    def _alloc(self, size: int, options: BufferSpec) -> HCQBuffer:
        dev = self.dev
        dev.reap()
        host = bool(options.host or options.cpu_access)
        try:
            return self._lease(size, host)
        except rig.Refused as e:
            if e.reason not in _OUT_OF_MEMORY:
                raise
            if dev.freeing:  # memory freed but not yet given back: wait for it
                dev.synchronize()
                dev.reap()
                with contextlib.suppress(rig.Refused):
                    return self._lease(size, host)
            # tinygrad's LRU allocator frees its cache on a MemoryError and tries again.
            raise MemoryError(f"RIG: {dev.device}: {e}") from e

    def _lease(self, size: int, host: bool) -> HCQBuffer:
        be = self.dev.backend
        if host:
            mem, gpu_va, addr = be.host(size)
            return HCQBuffer(addr, size, meta=_Mem(mem, gpu_va, True), view=MMIOInterface(addr, size), owner=self.dev)
        mem, gpu_va = be.gpu(size)
        return HCQBuffer(gpu_va, size, meta=_Mem(mem, gpu_va, False), owner=self.dev)

    def _free(self, buf: HCQBuffer, options: BufferSpec | None = None) -> None:
        """Gives the memory back once the GPU can no longer use it, without waiting.

        tinygrad's own `_free` synchronizes the device first. A buffer's last reference
        often goes in Python's cycle collector, which runs wherever the interpreter
        allocates: inside a queue's submit too, after the submit took its timeline value
        (`next_timeline`) and before that value is promised. The wait was then for a
        value only the interrupted submit sets: 30 s, and the timeout became the device's
        error for every later synchronize (seen on the H100 as test_hcq's "signal one
        short", docs/tinygrad.md). Here the free only notes the timeline's value now; the
        memory goes back to rigd once the timeline has reached it (`RigDevice.reap`)."""
        self.dev.freeing.append((self.dev.timeline_value - 1, buf.meta.mem))

    def _map(self, buf: HCQBuffer) -> None:
        if buf.owner is not self.dev:
            # Another device's memory (tinygrad's CPU device, another rig session) is
            # not in this session's address space, and rig lends only its own leases.
            raise RuntimeError(f"RIG: {self.dev.device} cannot map memory of {getattr(buf.owner, 'device', buf.owner)}")
        return None


# The refusals of a lease that mean the memory is not there now (rig.Refused.reason).
_OUT_OF_MEMORY = ("quota", "exhausted")


def _address(mv: memoryview) -> int | None:
    """The address of a writable memoryview's bytes; None for a read-only one."""
    try:
        return mv_address(mv) if mv.nbytes else None
    except TypeError:
        return None


class _Iface:
    """What tinygrad asks of a device's interface: its peer group, the device count,
    and the end."""

    def __init__(self, device: str, count: int, backend: Backend):
        self.peer_group, self.count, self.backend = device, count, backend

    def device_fini(self) -> None:
        self.backend.close()


def _gpus() -> list[str]:
    """RIG_GPU's addresses, else every GPU rigd serves that lends now (`rig.devices()`)."""
    gpus = [g.strip() for g in os.environ.get("RIG_GPU", "").split(",") if g.strip()]
    if gpus:
        return gpus
    try:
        served = rig.devices(os.environ.get("RIG_SOCKET") or None)
    except rig.RigError as e:
        raise RuntimeError(f"RIG: RIG_GPU is unset and rigd could not be asked which GPUs it serves: {e}") from e
    gpus = [str(d["bdf"]) for d in served if d["health"] == "serving"]
    if not gpus:
        raise RuntimeError("RIG: rigd serves no GPU that lends now (rigctl status); set RIG_GPU to one's PCI address")
    return gpus


class RigDevice(HCQCompiled):
    # The backend's type: rig's, or a test's fake (called with gpu, socket, rings, timeout).
    backend_t: Any = RigBackend

    def __init__(self, device: str = ""):
        index = int(device.split(":")[1]) if ":" in device else 0
        gpus = _gpus()
        if index >= len(gpus):
            raise RuntimeError(f"RIG: {device} is not among RIG_GPU's {len(gpus)} GPU(s)")
        self.timeout = float(os.environ.get("RIG_TIMEOUT", "30"))
        # How a graph's batch reaches the GPU: `early`, the first launch at once and
        # the rest in doubling runs (RigGraph.__call__); `once`, one submission after
        # the host queued it all.
        self.graph_submit = os.environ.get("RIG_GRAPH_SUBMIT", "early")
        if self.graph_submit not in ("once", "early"):
            raise ValueError(f"RIG_GRAPH_SUBMIT={self.graph_submit!r}: once or early")
        if (rings := os.environ.get("RIG_RINGS", "auto")) not in ("auto", "host", "gpu"):
            raise ValueError(f"RIG_RINGS={rings!r}: auto, host or gpu")
        self.backend: Backend = RigDevice.backend_t(
            gpus[index], os.environ.get("RIG_SOCKET", rig.DEFAULT_SOCKET), rings, self.timeout
        )
        # The last GPU work each kind of queue issued: where a queue's commands start.
        self.last_done: dict[str, Done | None] = {}
        # Memory freed and not yet given back: (timeline value it waits for, memory).
        self.freeing: collections.deque[tuple[int, Any]] = collections.deque()
        self.iface = _Iface(device, len(gpus), self.backend)
        super().__init__(
            device,
            RigAllocator(self),
            [RigCUDARenderer],
            functools.partial(RigProgram, self),
            RigSignal,
            RigComputeQueue,
            RigCopyQueue,
            kernargs_size=0x1000,
            arch=ARCH,
        )
        # Not HCQ's graph (it patches commands in GPU-visible memory, which rig's
        # runtime builds itself): rig's own, the batch replayed by one submission.
        # RIG_GRAPH=0: none, and TinyJit replays its kernels one by one.
        self.graph = RigGraph if os.environ.get("RIG_GRAPH", "1") != "0" else None

    def after(self, kind: str) -> list[tuple[Backend, Done]]:
        """Where a queue of `kind` starts: after the last GPU work such a queue issued."""
        last = self.last_done.get(kind)
        return [] if last is None else [(self.backend, last)]

    def in_place(self, wait: bool) -> list[tuple[Backend, Done]] | None:
        """What compute work issued in place, without an HCQ queue (`RigProgram`'s
        launch, `RigGraph`'s batch), follows: HCQ's wait for the timeline, as rig's
        `after`. None when it must go as HCQ's own queue: timed, profiled, or after a
        timeline value no queued work sets yet (the queue's channel then acquires the
        timeline's memory)."""
        deps = self.after("compute")
        if wait or PROFILE or not _follow(self.timeline_signal, self.timeline_value - 1, deps):
            return None
        return deps

    def placed(self, done: Done) -> None:
        """Compute work issued in place ends with `done`: later queues start after it,
        and the timeline's next value is set when it lands."""
        self.last_done["compute"] = done
        self.timeline_signal._set_after(self.backend, done, self.next_timeline())

    def signal_at(self, sig: RigSignal, var_vals: dict | None) -> RigSignal | int:
        """A queue's signal as a signal, or, for a symbolic one (tinygrad's `Variable`
        for its address), the GPU address of its memory in this session: the device's
        own timelines by their address (values its launches set in place are known only
        to the timeline object), any other signal as memory, which the GPU acquires
        and writes. A symbolic signal outside the session's memory is refused."""
        va = sig.base_buf.va_addr
        if isinstance(va, int):
            return sig
        addr = _resolve(va, var_vals)
        for t in (self.timeline_signal, getattr(self, "_shadow_timeline_signal", None)):
            if t is not None and t.base_buf.va_addr == addr:
                return t
        if (r := self.backend.find_host(addr)) is not None:
            return r.va + (addr - r.host_address)
        raise RuntimeError(f"RIG: a signal at {addr:#x}, which is no host memory of {self.device}")

    def check(self) -> None:
        """Raises the device's error when a channel of it faulted: what a host wait on
        memory nothing known sets asks between its looks."""
        for d in list(self.last_done.values()):
            if d is not None:
                _poll(self.backend, d)

    def reap(self) -> None:
        """Gives back the freed memory whose timeline value has been reached: every GPU
        command that could use it has landed (`RigAllocator._free`). Never waits, and
        never runs inside a finalizer."""
        if not self.freeing:
            return
        reached = self.timeline_signal.value
        while self.freeing and self.freeing[0][0] <= reached:
            self.backend.free(self.freeing.popleft()[1])

    def _wrap_timeline_signal(self) -> None:
        # tinygrad wraps the timeline right after a synchronize: every value waited for
        # is reached, and the timeline starts again at 0.
        self.freeing = collections.deque((0, mem) for _, mem in self.freeing)
        super()._wrap_timeline_signal()

    def locate(self, buf: HCQBuffer, var_vals: dict | None = None) -> tuple[int, bool]:
        """`buf`'s address as the GPU sees it, and whether it is host memory: from the
        buffer itself for a buffer of this device or a view of one (a host buffer's
        `va_addr` is its CPU address), else from the session, which says which lease
        holds the address (a symbolic one tinygrad resolved; a GPU address first, then
        an address of this process)."""
        va, base = buf.va_addr, buf.base
        if isinstance(va, int) and base.owner is self and isinstance(base.meta, _Mem):
            return base.meta.gpu_va + (va - base.va_addr), base.meta.host
        addr = _resolve(va, var_vals)
        if (r := self.backend.find(addr)) is not None:
            return addr, r.host
        if (r := self.backend.find_host(addr)) is not None:
            return r.va + (addr - r.host_address), True
        raise RuntimeError(f"RIG: {addr:#x} is in no buffer of {self.device} (rig copies only the session's memory)")

    def gpu_va(self, buf: HCQBuffer, var_vals: dict | None = None) -> int:
        """`buf`'s address as the GPU sees it (a host buffer's `va_addr` is the CPU's)."""
        return self.locate(buf, var_vals)[0]


def register() -> None:
    """Makes "RIG" a tinygrad device: tinygrad finds a device's class in the module
    tinygrad.runtime.ops_<name>, which this module stands in for."""
    sys.modules.setdefault("tinygrad.runtime.ops_rig", sys.modules[__name__])
    if "RIG" not in Device._devices:
        Device._devices.append("RIG")


def main(argv: list[str]) -> None:
    """``python -m rig_gpu.tinygrad prog.py [args]``: runs `prog.py` as ``__main__`` with
    the RIG device registered and ``DEV=RIG`` unless ``DEV`` is set."""
    import runpy

    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m rig_gpu.tinygrad PROGRAM.py [ARGS...]  (runs it with DEV=RIG)")
        raise SystemExit(0 if argv else 2)
    import rig_gpu.tinygrad  # noqa: F401  # the registered module, not this __main__ copy

    os.environ.setdefault("DEV", "RIG")
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
else:
    register()
