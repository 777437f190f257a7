"""tinygrad's RIG device (rig_gpu/tinygrad.py) over a fake backend: tinygrad's own HCQ
allocator, queues and signals drive it; the fake runs each engine's work only when a
wait or poll reaches it, so a command that did not wait for the other engine's work
reads stale memory and fails here. No GPU: kernels are Python functions (the device
with rig's runtime, NVRTC and tinygrad's own tests run on the H200: tests/h200/tinygrad).
"""

from __future__ import annotations

import ctypes
import os

import pytest

os.environ.setdefault("CACHELEVEL", "0")
tinygrad_device = pytest.importorskip("tinygrad.device")

import rig_gpu as rig  # noqa: E402
import rig_gpu.tinygrad as rt  # noqa: E402
from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.device import BufferSpec, Device  # noqa: E402


class Blocked(Exception):
    """A fake engine's acquire whose value is not there: the channel waits."""


class FakeDone:
    def __init__(self, engine: str, value: int):
        self.engine, self.value = engine, value


class FakeMem:
    def __init__(self, size: int, host: bool):
        self.raw = ctypes.create_string_buffer(size)
        self.addr, self.size, self.host, self.freed = ctypes.addressof(self.raw), size, host, False


class FakeRegion:
    def __init__(self, va: int, size: int, host: bool, host_address: int | None):
        self.va, self.size, self.host, self.host_address = va, size, host, host_address


class FakeEvent:
    def __init__(self):
        self.ns: int | None = None
        self.done: FakeDone | None = None


class FakeKernel:
    def __init__(self, fn):
        self.fn = fn


class FakeModule:
    def __init__(self, kernels):
        self.kernels = kernels

    def kernel(self, name: str):
        if name not in self.kernels:
            raise rig.LaunchError(f"No kernel {name}")
        return FakeKernel(self.kernels[name])


# name -> fn(grid, block, args): what "cubins" hold in the fake.
KERNELS: dict = {}

# Where the fake's GPU sees host memory: CPU address + HOST_SHIFT.
HOST_SHIFT = 1 << 48  # past the 47 bits of user space


def cpu(gpu_va: int) -> int:
    """The CPU address of what a fake kernel is given (host memory is shifted)."""
    return gpu_va - HOST_SHIFT if gpu_va >= HOST_SHIFT else gpu_va


class FakeBackend:
    """One session: memory is the process's own; copy-engine work is a FIFO that runs
    only as far as a wait (or a poll that finds it "landed") reaches, as a slow copy
    would; a launch runs when it is issued, as a kernel the GPU starts at once would.
    So a launch issued before the copy it reads has landed reads stale memory."""

    eager = {"compute"}

    opened: list[FakeBackend] = []
    clock_ns = 1_000_000

    def __init__(self, gpu: str, socket: str, rings: str, timeout: float):
        self.gpu_address, self.closed = gpu, False
        self.queues: dict[str, list] = {"compute": [], "copy": []}
        self.issued = {"compute": 0, "copy": 0}
        self.running: set[str] = set()
        self.ran = {"compute": 0, "copy": 0}
        self.polls: dict[tuple[str, int], int] = {}
        self.mems: list[FakeMem] = []
        self.launches = 0
        self.waited_on_gpu = 0
        self.recorded = 0
        self.record_engines: list[str] = []
        # The values the GPU was asked to write and the acquires of memory.
        self.writes: list[tuple[str, int, int]] = []
        self.acquires: list[tuple[str, int, int]] = []
        self.fault: str | None = None
        # Doorbells held by the queue's submit (`hold`/`submit`), and what was
        # issued while they were.
        self.held = False
        self.held_issues = 0
        self.submits = 0
        self.replays = 0
        # How many commands each submission sent (issued since the one before).
        self.runs: list[int] = []
        self._unsent = 0
        # Called as each command is issued: what Python's cycle collector may run there.
        self.on_issue = None
        # GPU memory rigd lends this session before it refuses ("quota"), or None.
        self.gpu_quota: int | None = None
        FakeBackend.opened.append(self)

    def _mem(self, size: int, host: bool) -> FakeMem:
        m = FakeMem(size, host)
        self.mems.append(m)
        return m

    def gpu(self, size):
        if self.gpu_quota is not None:
            lent = sum(m.size for m in self.mems if not m.host and not m.freed)
            if lent + size > self.gpu_quota:
                e = rig.Refused(f"GPU memory: quota: {lent} B lent, {size} B more asked")
                e.reason = "quota"
                raise e
        m = self._mem(size, False)
        return m, m.addr

    def host(self, size):
        # A host lease's GPU address is not its CPU address (as with rig's leases).
        m = self._mem(size, True)
        return m, m.addr + HOST_SHIFT, m.addr

    def free(self, mem):
        assert not mem.freed, "freed twice"
        mem.freed = True

    def _issue(self, engine: str, work, after=()) -> FakeDone:
        # A GPU-side wait: when the engine reaches this work, the other engine's work
        # it waits for lands first (as the channel's semaphore acquire holds it).
        if self.on_issue is not None:
            self.on_issue()
        deps = [(d.engine, d.value) for d in after]
        assert all(e != engine for e, _ in deps), "an engine's own work is in order already"

        def run():
            for e, v in deps:
                self._run(e, v)
                if self.ran[e] < v:
                    raise Blocked(f"{e} {v}")  # what it acquires is held up itself
            work()

        self.issued[engine] += 1
        self.held_issues += self.held
        self._unsent += 1
        self.queues[engine].append((self.issued[engine], run))
        if engine in self.eager:
            self._run(engine, self.issued[engine])
        return FakeDone(engine, self.issued[engine])

    def _run(self, engine: str, upto: int) -> None:
        if engine in self.running:  # an acquire of it runs the other engine, which asks back
            return
        self.running.add(engine)
        try:
            self._run_queue(engine, upto)
        finally:
            self.running.discard(engine)

    def _run_queue(self, engine: str, upto: int) -> None:
        q = self.queues[engine]
        while q and q[0][0] <= upto:
            value, work = q[0]
            try:
                work()
            except Blocked:  # an acquire not met: the channel waits there
                return
            except Exception as e:  # the "GPU" faulted: the channel is stopped
                self.fault = f"{type(e).__name__}: {e}"
                q.clear()
                return
            q.pop(0)
            self.ran[engine] = value

    def find(self, va):
        # What rig's session answers: the lease holding a GPU address (host memory is
        # at its CPU address + HOST_SHIFT for the "GPU").
        for m in self.mems:
            start = m.addr + HOST_SHIFT if m.host else m.addr
            if not m.freed and start <= va < start + m.size:
                return FakeRegion(start, m.size, m.host, m.addr if m.host else None)
        return None

    def find_host(self, addr):
        for m in self.mems:
            if m.host and not m.freed and m.addr <= addr < m.addr + m.size:
                return FakeRegion(m.addr + HOST_SHIFT, m.size, True, m.addr)
        return None

    def copy(self, dst_va, src_va, size, after):
        # As rig's runtime checks a copy by address: both ends inside one lease each.
        d, s = self.find(dst_va), self.find(src_va)
        assert d is not None and s is not None, "a copy outside the session's memory"
        assert dst_va + size <= d.va + d.size and src_va + size <= s.va + s.size, "a copy past its memory"
        engine = "copy" if d.host or s.host else "compute"
        return self._issue(engine, lambda: ctypes.memmove(cpu(dst_va), cpu(src_va), size), after)

    def load(self, lib):
        return FakeModule(KERNELS)

    def launch(self, kernel, grid, block, args, after):
        self.launches += 1
        self.waited_on_gpu += len(after)
        return self._issue("compute", lambda: kernel.fn(grid, block, args), after)

    def poll(self, done):
        # Lands on the second look, so signals must wait for it properly.
        key = (done.engine, done.value)
        self.polls[key] = self.polls.get(key, 0) + 1
        if self.polls[key] < 2:
            return False
        self._run(done.engine, done.value)
        if self.fault is not None:
            raise rig.Fault(self.fault)
        return self.ran[done.engine] >= done.value

    def wait(self, done, timeout):
        self._run(done.engine, done.value)
        if self.fault is not None:
            raise rig.Fault(self.fault)
        if self.ran[done.engine] < done.value:
            # Held up behind an acquire nothing met: rig's wait times out.
            raise rig.Timeout(f"{done.engine} value {done.value} did not land within {timeout} s")

    def write_value(self, engine, va, value, after):
        # The value, then the GPU's time, at the place's CPU address: a release of the
        # engine once its earlier work (and `after`) is done.
        region = self.find(va)
        assert region is not None and va + 16 <= region.va + region.size, "a value outside the session's memory"
        assert va % 16 == 0, "rig refuses a misaligned value"
        self.writes.append((engine, va, value))

        def write():
            FakeBackend.clock_ns += 1000
            ctypes.c_uint64.from_address(cpu(va)).value = value
            ctypes.c_uint64.from_address(cpu(va) + 8).value = FakeBackend.clock_ns

        return self._issue(engine, write, after)

    def wait_value(self, engine, va, value):
        # The engine's acquire: nothing after it on that channel runs before the
        # memory holds `value`.
        region = self.find(va)
        assert region is not None and va + 8 <= region.va + region.size, "a value outside the session's memory"
        self.acquires.append((engine, va, value))

        def acquire():
            word = ctypes.c_uint64.from_address(cpu(va))
            if word.value < value:
                # The other engine runs beside this one: what it has queued may set it.
                other = "copy" if engine == "compute" else "compute"
                self._run(other, self.issued[other])
            if word.value < value:
                raise Blocked(f"{va:#x} < {value}")

        return self._issue(engine, acquire)

    def hold(self):
        self.held = True

    def submit(self):
        self.held = False
        self.submits += 1
        self.runs.append(self._unsent)
        self._unsent = 0

    def graph(self):
        return FakeGraph()

    def replay(self, graph, after, submit):
        # As rig's `Runtime.replay`: the first launch after `after`, the doorbell rung
        # after launches 1, 2, 4, 8… ("early") or once, never while held.
        assert graph.launches, "rig refuses an empty graph"
        held, self.held = self.held, True
        self.replays += 1
        cut = 1 if submit == "early" and not held else len(graph.launches)
        for j, (kernel, grid, block, args) in enumerate(graph.launches):
            if j == cut:
                self.submit()
                self.held = True
                cut *= 2
            done = self.launch(kernel, grid, block, list(args), after if j == 0 else [])
        if held:
            return done
        self.submit()
        return done

    def record(self, engine, after):
        # The fake GPU's timer: a counter of nanoseconds that moves only when work
        # runs, read when the engine reaches the record.
        ev = FakeEvent()

        def stamp():
            FakeBackend.clock_ns += 1000
            ev.ns = FakeBackend.clock_ns

        ev.done = self._issue(engine, stamp, after)
        self.recorded += 1
        self.record_engines.append(engine)
        return ev

    def event_time(self, ev, timeout):
        self.wait(ev.done, timeout)
        assert ev.ns is not None, "the record ran"
        return ev.ns

    def close(self):
        self.closed = True


class FakeGraph:
    """`rig.Graph` in the fake: launches as [kernel, grid, block, args], patched in
    place; each argument patched must exist, as rig's refuses an index past them."""

    def __init__(self):
        self.launches: list[list] = []
        self.patches = 0

    def add(self, kernel, grid, block, args):
        self.launches.append([kernel, tuple(grid), tuple(block), list(args)])
        return len(self.launches) - 1

    def set_arg(self, launch, index, value):
        args = self.launches[launch][3]
        if not 0 <= index < len(args):
            raise IndexError(f"launch {launch} has no argument {index}")
        args[index] = value
        self.patches += 1

    def set_dims(self, launch, grid, block):
        self.launches[launch][1:3] = [tuple(grid), tuple(block)]
        self.patches += 1

    def __len__(self):
        return len(self.launches)


@pytest.fixture(scope="module")
def dev(monkeypatch_module):
    monkeypatch_module.setenv("RIG_GPU", "0000:00:06.0")
    monkeypatch_module.setattr(rt.RigDevice, "backend_t", FakeBackend)
    d = Device["RIG"]
    assert isinstance(d, rt.RigDevice)
    return d


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_the_device_is_registered_and_compiles_for_sm_90(dev):
    assert "RIG" in Device._devices
    assert dev.arch == "sm_90"
    # tinygrad's CUDA C renderer; NVRTC (not here) compiles it to a cubin, not PTX,
    # because the device is not named CUDA.
    assert [r.__name__ for r in dev.renderers] == ["RigCUDARenderer"]
    assert dev._renderer_name(dev.renderers[0]) == "CUDA"
    assert isinstance(dev.backend, FakeBackend)
    assert dev.graph is rt.RigGraph


def test_float32_matmuls_leave_tf32_tensor_cores_out_unless_allowed():
    import tinygrad.codegen.opt.tc as tc
    from tinygrad.helpers import Context

    r = object.__new__(rt.RigCUDARenderer)  # no NVRTC here: only the property
    r.tensor_cores = tc.cuda_sm80
    assert r.tensor_cores, "half and bf16 stay"
    assert all(t.dtype_in != dtypes.float for t in r.tensor_cores)
    with Context(ALLOW_TF32=1):
        assert any(t.dtype_in == dtypes.float for t in r.tensor_cores)


def test_tensors_go_to_the_gpu_and_back(dev):
    t = Tensor([1.0, 2.5, -3.0, 4.0], device="RIG").realize()
    assert t.device == "RIG"
    assert t.tolist() == [1.0, 2.5, -3.0, 4.0]


def test_a_copy_longer_than_the_staging_buffers_is_whole(dev):
    # More chunks than the four 16 MiB staging buffers, the last one short: the copy out
    # reuses a buffer while later ones are in flight.
    size = 5 * (16 << 20) + 12345
    data = bytes((i * 7 + 3) % 251 for i in range(251)) * (size // 251) + b"\x05" * (size % 251)
    t = Tensor(data, device="RIG", dtype=dtypes.uint8).realize()
    back = bytes(t.data())
    assert len(back) == size
    assert back == data


def test_a_kernel_runs_after_the_copy_it_reads_and_before_the_copy_that_reads_it(dev):
    n = 1024

    def add_one(grid, block, args):
        out, inp, count = args
        assert grid == (4, 1, 1) and block == (256, 1, 1)
        src = (ctypes.c_float * count).from_address(cpu(inp))
        dst = (ctypes.c_float * count).from_address(cpu(out))
        for i in range(count):
            dst[i] = src[i] + 1.0

    KERNELS["add_one"] = add_one
    prg = dev.runtime("add_one", b"fake cubin")
    a = dev.allocator.alloc(4 * n, BufferSpec())
    b = dev.allocator.alloc(4 * n, BufferSpec())
    src = memoryview(bytearray((ctypes.c_float * n)(*range(n))))
    dev.allocator._copyin(a, src)
    gpu_waits = dev.backend.waited_on_gpu
    prg(b, a, global_size=(4, 1, 1), local_size=(256, 1, 1), vals=(n,))
    # The launch waited for the upload on the GPU (an acquire), not on the host.
    assert dev.backend.waited_on_gpu == gpu_waits + 1
    out = memoryview(bytearray(4 * n))
    dev.allocator._copyout(out, b)
    got = list((ctypes.c_float * n).from_buffer(out))
    assert got == [float(i + 1) for i in range(n)]
    dev.allocator.free(a, 4 * n, BufferSpec())
    dev.allocator.free(b, 4 * n, BufferSpec())


def test_a_timed_launch_waits_and_reports_a_time(dev):
    KERNELS["nop"] = lambda grid, block, args: None
    prg = dev.runtime("nop", b"fake cubin")
    # A copy first: the timeline's last work is then the copy engine's.
    b = dev.allocator.alloc(64, BufferSpec())
    dev.allocator._copyin(b, memoryview(bytearray(64)))
    recorded = dev.backend.recorded
    t = prg(global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
    # The time is the GPU's: two events recorded around the launch on the compute
    # channel (the start too, although the queue first waits for the timeline, whose
    # last work may be a copy), the fake timer moving 1 µs per record.
    assert dev.backend.recorded == recorded + 2
    assert dev.backend.record_engines[-2:] == ["compute", "compute"]
    # Both records and the launch were issued with the doorbells held: the queue
    # reaches the GPU as one submission.
    assert dev.backend.held_issues >= 3 and not dev.backend.held
    dev.allocator.free(b, 64, BufferSpec())
    assert t is not None and abs(t - 1e-6) < 1e-9, t
    assert dev.timeline_signal.value == dev.timeline_value - 1


def test_signals_are_set_only_when_the_work_lands(dev):
    KERNELS["nop"] = lambda grid, block, args: None
    prg = dev.runtime("nop", b"fake cubin")
    target = dev.timeline_value
    prg(global_size=(1, 1, 1), local_size=(1, 1, 1))
    # The first look finds the launch in flight: the value has not moved.
    assert dev.timeline_signal.value == target - 1
    dev.synchronize()
    assert dev.timeline_signal.value == target


def test_host_buffers_are_written_at_their_cpu_address_and_given_to_kernels_at_their_gpu_address(dev):
    n = 64

    def double(grid, block, args):
        out, inp = args
        assert inp >= HOST_SHIFT, "a host buffer reaches a kernel at its GPU address"
        src = (ctypes.c_int32 * n).from_address(cpu(inp))
        dst = (ctypes.c_int32 * n).from_address(cpu(out))
        for i in range(n):
            dst[i] = 2 * src[i]

    KERNELS["double"] = double
    prg = dev.runtime("double", b"fake cubin")
    host = dev.allocator.alloc(4 * n, BufferSpec(cpu_access=True, nolru=True))
    (ctypes.c_int32 * n).from_address(host.va_addr)[:] = list(range(n))  # as tinygrad's tests do
    out = dev.allocator.alloc(4 * n, BufferSpec(nolru=True))
    prg(out, host, global_size=(1, 1, 1), local_size=(n, 1, 1))
    got = memoryview(bytearray(4 * n))
    dev.allocator._copyout(got, out)
    assert list(got.cast("i")) == [2 * i for i in range(n)]
    dev.allocator.free(host, 4 * n, BufferSpec(cpu_access=True, nolru=True))
    dev.allocator.free(out, 4 * n, BufferSpec(nolru=True))


def test_a_queue_waiting_on_a_signal_the_host_sets_later_goes_on_when_it_is_set(dev):
    for queue_t in (dev.hw_compute_queue_t, dev.hw_copy_queue_t):
        gate = dev.new_signal()
        queue_t().wait(gate, 1).signal(dev.timeline_signal, dev.timeline_value).submit(dev)
        with pytest.raises(RuntimeError, match="Wait timeout"):
            dev.timeline_signal.wait(dev.timeline_value, timeout=100)
        gate.value = 1
        dev.timeline_signal.wait(dev.timeline_value, timeout=1000)
        dev.timeline_value += 1


def test_a_buffer_freed_inside_a_submit_goes_back_once_the_work_before_it_lands(dev, monkeypatch):
    # A tinygrad Buffer's last reference often goes in Python's cycle collector, which
    # may run inside a queue's submit, after the submit took its timeline value. A free
    # that synchronized there waited for the value only that submit sets: 30 s, then the
    # device's error for good (test_hcq's "one short" hang on the H100).
    spec, host = BufferSpec(nolru=True), BufferSpec(host=True, nolru=True)
    victim = dev.allocator.alloc(64, spec)
    src, dst = dev.allocator.alloc(64, host), dev.allocator.alloc(64, spec)
    be = dev.backend
    at_free = []

    def collector_runs() -> None:  # it finds the last Buffer holding `victim`
        be.on_issue = None
        with monkeypatch.context() as m:
            m.setattr(dev, "synchronize", lambda *a, **k: pytest.fail("a free waited for the device"))
            dev.allocator.free(victim, 64, spec)
        at_free.append(victim.meta.mem.freed)

    be.on_issue = collector_runs
    dev.hw_copy_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1).copy(dst, src, 64).signal(
        dev.timeline_signal, dev.next_timeline()
    ).submit(dev)
    assert at_free == [False], "the memory stays lent while work queued before the free may use it"
    assert not victim.meta.mem.freed, "the copy has not landed (the fake's copies land when waited for)"
    dev.synchronize()
    later = dev.allocator.alloc(64, spec)  # an allocation gives back what has landed
    assert victim.meta.mem.freed
    for b, o in ((src, host), (dst, spec), (later, spec)):
        dev.allocator.free(b, 64, o)


def test_memory_freed_but_not_given_back_is_waited_for_before_an_allocation_is_refused(dev):
    spec = BufferSpec(nolru=True)
    be = dev.backend
    dev.allocator.free_cache()  # else tinygrad frees its cache when refused, and gets memory
    dev.synchronize()
    dev.reap()
    lent = sum(m.size for m in be.mems if not m.host and not m.freed)
    be.gpu_quota = lent + (1 << 20)
    try:
        big = dev.allocator.alloc(1 << 20, spec)
        # A copy into it in flight, then the free: the memory goes back only once it lands.
        src = dev.allocator.alloc(64, BufferSpec(host=True, nolru=True))
        dev.hw_copy_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1).copy(big, src, 64).signal(
            dev.timeline_signal, dev.next_timeline()
        ).submit(dev)
        dev.allocator.free(big, 1 << 20, spec)
        assert not big.meta.mem.freed
        again = dev.allocator.alloc(1 << 20, spec)  # refused once, then waited for and given
        assert big.meta.mem.freed
        # More than the quota holds: tinygrad's MemoryError, with rig's refusal as its cause.
        with pytest.raises(MemoryError) as e:
            dev.allocator.alloc(1 << 20, spec)
        causes = [e.value]
        while causes[-1].__cause__ is not None:
            causes.append(causes[-1].__cause__)
        assert isinstance(causes[-1], rig.Refused) and causes[-1].reason == "quota", causes
        dev.allocator.free(again, 1 << 20, spec)
        dev.allocator.free(src, 64, BufferSpec(host=True, nolru=True))
    finally:
        be.gpu_quota = None


class _Arg:
    """What tinygrad's PROGRAM ast carries for a graph: launch dims and variables."""

    def __init__(self, grid, block, names):
        self.grid, self.block = grid, block
        self.vars = [type("Var", (), {"expr": n})() for n in names]

    def launch_dims(self, var_vals):
        return self.grid, self.block


class _Buf:
    """A tinygrad Buffer (or an input UOp's `.buffer`) as a graph sees it."""

    def __init__(self, hcq):
        self.device, self._buf, self.buffer = "RIG", hcq, self


def _graph(calls, uop_replace, names, var_vals_replace):
    """A RigGraph over `calls` ((program, n, bufs, variable names)), with GraphRunner's
    bookkeeping as tinygrad sets it (its __init__ needs a JIT's linear UOp, and that
    needs NVRTC): which buffer each input replaces, and which value each variable."""
    g = object.__new__(rt.RigGraph)
    g.calls = [
        (0, type("Ast", (), {"arg": _Arg((1, 1, 1), (n, 1, 1), vs)})(), [_Buf(b) for b in bufs], {})
        for (_, n, bufs, vs) in calls
    ]
    g.runtimes = [c[0] for c in calls]
    g.uop_replace, g.vars, g.var_vals_replace = uop_replace, names, var_vals_replace
    g.launch_dims_replace, g.launch_dims_base, g.symbolic_dims = {}, {}, []
    g._record()
    return g


def test_a_jit_batch_replays_as_one_submission_patched_and_in_order(dev):
    n = 64

    def floats(addr):
        return (ctypes.c_float * n).from_address(cpu(addr))

    def add_one(grid, block, args):
        out, inp = args
        floats(out)[:] = [x + 1.0 for x in floats(inp)]

    def scale(grid, block, args):
        out, inp, k = args
        floats(out)[:] = [x * k for x in floats(inp)]

    KERNELS["g_add_one"], KERNELS["g_scale"] = add_one, scale
    add, mul = dev.runtime("g_add_one", b"fake cubin"), dev.runtime("g_scale", b"fake cubin")
    spec = BufferSpec(nolru=True)
    a1, a2, b, c = (dev.allocator.alloc(4 * n, spec) for _ in range(4))
    # b = a + 1, then c = b * k: the JIT's input a (buffer 1 of the first kernel) and its
    # variable k (the second kernel's value 0) are given at each call.
    g = _graph([(add, n, [b, a1], []), (mul, n, [c, b], ["k"])], [[(1, 0)], []], ["k"], {1: [(0, 0)]})
    be = dev.backend
    was, dev.graph_submit = dev.graph_submit, "once"
    for a, base, k in ((a1, 0.0, 2), (a2, 100.0, 3), (a1, 0.0, 5)):
        # The upload is the copy engine's, which the fake runs only when a wait
        # reaches it: the first kernel must wait for it on the GPU.
        dev.allocator._copyin(a, memoryview(bytearray((ctypes.c_float * n)(*[base + i for i in range(n)]))))
        submits, held, launches, gpu_waits = be.submits, be.held_issues, be.launches, be.waited_on_gpu
        replays, patches = be.replays, g.graph.patches
        assert g([_Buf(a)], {"k": k}) is None
        assert be.launches == launches + 2
        assert be.replays == replays + 1, "the batch is one replay of the recorded graph"
        assert g.graph.patches == patches + 2, "the input buffer and the variable patched, nothing else"
        assert be.submits == submits + 1, "one submission for the batch"
        assert be.held_issues == held + 2, "both launches queued under held doorbells"
        assert be.waited_on_gpu == gpu_waits + 1, "the first kernel waited for the upload on the GPU"
        got = memoryview(bytearray(4 * n))
        dev.allocator._copyout(got, c)
        assert list(got.cast("f")) == [(base + i + 1.0) * k for i in range(n)]
    assert dev.timeline_signal.value == dev.timeline_value - 1

    # Timed: the GPU's time between events around the batch (the fake's timer moves
    # 1 µs per record), the batch as one queue of HCQ's commands.
    t = g([_Buf(a2)], {"k": 1}, wait=True)
    assert t is not None and abs(t - 1e-6) < 1e-9, t
    # Behind a queue waiting on a signal the host sets later: the queue's channel
    # acquires the signal's memory, and the batch is queued behind it at once (the
    # host holds nothing back); the GPU runs it once the host sets the signal.
    gate = dev.new_signal()
    dev.hw_compute_queue_t().wait(gate, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
    assert be.acquires[-1] == ("compute", dev.gpu_va(gate.base_buf), 1)
    launches, ran = be.launches, be.ran["compute"]
    g([_Buf(a1)], {"k": 7})
    assert be.launches == launches + 2, "queued at once"
    assert be.ran["compute"] == ran, "held by the GPU behind the acquire"
    gate.value = 1
    dev.synchronize()
    got = memoryview(bytearray(4 * n))
    dev.allocator._copyout(got, c)
    assert list(got.cast("f")) == [(i + 1.0) * 7 for i in range(n)]
    dev.graph_submit = was
    for x in (a1, a2, b, c):
        dev.allocator.free(x, 4 * n, spec)


def test_an_early_graph_sends_its_first_launch_at_once_then_doubling_runs(dev):
    # RIG_GRAPH_SUBMIT=early, the default: seven launches, each adding one to the buffer before,
    # reach the GPU as runs of 1, 1, 2 and 3, in order.
    n, k = 16, 7

    def floats(addr):
        return (ctypes.c_float * n).from_address(cpu(addr))

    def inc(grid, block, args):
        out, inp = args
        floats(out)[:] = [x + 1.0 for x in floats(inp)]

    KERNELS["g_inc"] = inc
    prg = dev.runtime("g_inc", b"fake cubin")
    spec = BufferSpec(nolru=True)
    bufs = [dev.allocator.alloc(4 * n, spec) for _ in range(k + 1)]
    dev.allocator._copyin(bufs[0], memoryview(bytearray(4 * n)))
    g = _graph([(prg, n, [bufs[i + 1], bufs[i]], []) for i in range(k)], [[] for _ in range(k)], [], {})
    be = dev.backend
    assert dev.graph_submit == "early", "the default"
    for _ in range(2):
        dev.synchronize()
        be.runs.clear()
        g([], {})
        assert be.runs == [1, 1, 2, 3], be.runs
        got = memoryview(bytearray(4 * n))
        dev.allocator._copyout(got, bufs[k])
        assert list(got.cast("f")) == [float(k)] * n
    for b in bufs:
        dev.allocator.free(b, 4 * n, spec)


def test_rig_graph_submit_takes_once_or_early(monkeypatch):
    # Refused before any session opens (the backend would be rig's, not the fake's).
    monkeypatch.setenv("RIG_GPU", "0000:00:06.0")
    monkeypatch.setenv("RIG_GRAPH_SUBMIT", "soon")
    with pytest.raises(ValueError, match="RIG_GRAPH_SUBMIT='soon': once or early"):
        rt.RigDevice("RIG:0")


def test_rig_rings_takes_auto_host_or_gpu(monkeypatch):
    monkeypatch.setenv("RIG_GPU", "0000:00:06.0")
    monkeypatch.setenv("RIG_RINGS", "vram")
    with pytest.raises(ValueError, match="RIG_RINGS='vram': auto, host or gpu"):
        rt.RigDevice("RIG:0")


def test_auto_rings_are_gpu_rings_where_rigd_lends_them_else_host_rings():
    class Session:
        """A session whose rigd refuses GPU rings (`refuse`) or refuses a channel for
        another reason."""

        def __init__(self, refuse: str | None):
            self.refuse, self.asked = refuse, []

        def runtime(self, timeout, gpu_rings):
            self.asked.append(gpu_rings)
            if gpu_rings and self.refuse:
                e = rig.Refused(f"channel: {self.refuse}")
                e.reason = self.refuse
                raise e
            return "gpu" if gpu_rings else "host"

    be = object.__new__(rt.RigBackend)
    for rings, refuse, want, asked in (
        ("auto", None, "gpu", [True]),
        ("auto", "gpu_rings_refused", "host", [True, False]),
        ("host", "gpu_rings_refused", "host", [False]),
    ):
        be.session = Session(refuse)
        assert be._runtime(1.0, rings) == want, (rings, refuse)
        assert be.session.asked == asked
    # Any other refusal is not a reason to fall back: it is raised.
    be.session = Session("channel_limit")
    with pytest.raises(rig.Refused):
        be._runtime(1.0, "auto")
    be.session = Session("gpu_rings_refused")
    with pytest.raises(rig.Refused):
        be._runtime(1.0, "gpu")


def _nvrtc() -> None:
    """NVRTC from the pinned `nvidia-cuda-nvrtc` wheel (client/python/tests/
    requirements.txt), for tinygrad to compile with: NVRTC_PATH names the library, and
    its builtins, which it opens by name, are loaded first."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    assert spec is not None and spec.submodule_search_locations, "the nvidia-cuda-nvrtc wheel is pinned"
    lib = os.path.join(list(spec.submodule_search_locations)[0], "cu13", "lib")
    ctypes.CDLL(os.path.join(lib, "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
    os.environ.setdefault("NVRTC_PATH", os.path.join(lib, "libnvrtc.so.13"))


def test_tinyjit_runs_its_batches_as_rig_graphs(dev, monkeypatch):
    # tinygrad's own JIT, compiler (NVRTC) and GraphRunner: only the kernels are the
    # fake's. Every kernel here adds one to each of its input's floats, which the fake
    # does for any kernel given (output, input).
    _nvrtc()
    from tinygrad import TinyJit
    from tinygrad.uop.ops import Ops

    def add_one(grid, block, args):
        if len(args) == 2:
            out, inp = args
            n = grid[0] * block[0]
            src = (ctypes.c_float * n).from_address(cpu(inp))
            (ctypes.c_float * n).from_address(cpu(out))[:] = [x + 1.0 for x in src]

    monkeypatch.setattr(FakeBackend, "load", lambda self, lib: FakeModule(_Every(add_one)))

    @TinyJit
    def plus_three(x):
        a = (x + 1).contiguous().realize()
        b = (a + 1).contiguous().realize()
        return (b + 1).contiguous().realize()

    be = dev.backend
    for i in range(5):
        x = Tensor([10.0 * i, 10.0 * i + 1], device="RIG").realize()
        launches = be.launches
        assert plus_three(x).tolist() == [10.0 * i + 3, 10.0 * i + 4], i
        assert be.launches == launches + 3
    # Captured (the JIT's third call on): its three kernels are one graph call.
    calls = plus_three.captured.linear.src
    assert [(c.src[0].op, c.src[0].arg) for c in calls] == [(Ops.CUSTOM_FUNCTION, "graph")]
    assert len(calls[0].src[0].src[0].src) == 3


class _Every(dict):
    """Kernels by name for the fake: `fn` for every name."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __contains__(self, name):
        return True

    def __getitem__(self, name):
        return self.fn


def test_symbolic_signals_values_and_addresses_resolve_at_submit(dev):
    from tinygrad import Variable
    from tinygrad.runtime.support.hcq import HCQBuffer

    value = Variable("v", 0, 0xFFFFFFFF, dtypes.uint32)
    addr = Variable("sig", 0, 0xFFFFFFFFFFFFFFFF, dtypes.uint64)
    virt = dev.signal_t(base_buf=HCQBuffer(addr, 16))
    q = dev.hw_compute_queue_t().signal(virt, value)
    for _ in range(3):
        q.submit(dev, {addr.expr: dev.timeline_signal.base_buf.va_addr, value.expr: dev.timeline_value})
        dev.timeline_signal.wait(dev.timeline_value, timeout=1000)
        dev.timeline_value += 1

    src_va = Variable("src", 0, 0xFFFFFFFFFFFFFFFF, dtypes.uint64)
    dst_va = Variable("dst", 0, 0xFFFFFFFFFFFFFFFF, dtypes.uint64)
    src = dev.allocator.alloc(64, BufferSpec(host=True, nolru=True))
    dst = dev.allocator.alloc(64, BufferSpec(nolru=True))
    (ctypes.c_uint8 * 64).from_address(src.va_addr)[:] = list(range(64))
    dev.hw_copy_queue_t().wait(dev.timeline_signal, dev.timeline_value - 1).copy(
        HCQBuffer(dst_va, 32), HCQBuffer(src_va, 32), 32
    ).signal(dev.timeline_signal, dev.timeline_value).submit(
        dev, {src_va.expr: src.va_addr + 16, dst_va.expr: dst.va_addr + 8}
    )
    dev.timeline_value += 1
    got = memoryview(bytearray(64))
    dev.allocator._copyout(got, dst)
    assert list(got[8:40]) == list(range(16, 48))
    with pytest.raises(RuntimeError, match="is in no buffer"):
        dev.hw_copy_queue_t().copy(HCQBuffer(dst_va, 8), HCQBuffer(src_va, 8), 8).submit(
            dev, {src_va.expr: 0x1000, dst_va.expr: dst.va_addr}
        )
    dev.allocator.free(src, 64, BufferSpec(host=True, nolru=True))
    dev.allocator.free(dst, 64, BufferSpec(nolru=True))


def test_a_signal_a_queue_sets_is_written_into_its_memory_by_the_engine_after_the_work(dev):
    be = dev.backend
    sig = dev.new_signal()
    src = dev.allocator.alloc(64, BufferSpec(host=True, nolru=True))
    dst = dev.allocator.alloc(64, BufferSpec(nolru=True))
    word = ctypes.c_uint64.from_address(sig.base_buf.va_addr)
    stamp = ctypes.c_uint64.from_address(sig.base_buf.va_addr + 8)
    dev.hw_copy_queue_t().copy(dst, src, 64).signal(sig, 5).submit(dev)
    # The copy channel writes it behind the copy (the fake copy engine has not run).
    assert be.writes[-1] == ("copy", dev.gpu_va(sig.base_buf), 5)
    assert word.value == 0 and sig.value == 0
    sig.wait(5, timeout=1000)
    assert (word.value, sig.value) == (5, 5)
    assert stamp.value > 0, "the GPU's time after the value"
    # The host sets it: the memory at once.
    sig.value = 9
    assert word.value == 9
    dev.allocator.free(src, 64, BufferSpec(host=True, nolru=True))
    dev.allocator.free(dst, 64, BufferSpec(nolru=True))


def test_a_queue_waiting_on_a_signal_a_later_queue_of_the_other_channel_sets_is_held_by_the_gpu(dev):
    # Submitted first, the compute queue waits for what the copy queue submitted after
    # it sets: its channel acquires the signal's memory; the copy queue goes at once,
    # and the kernel reads what the copy wrote. (A host that held the first queue back
    # would have held the second behind it too.)
    be = dev.backend
    n = 16
    ready = dev.new_signal()
    src = dev.allocator.alloc(4 * n, BufferSpec(host=True, nolru=True))
    mid = dev.allocator.alloc(4 * n, BufferSpec(nolru=True))
    out = dev.allocator.alloc(4 * n, BufferSpec(nolru=True))
    (ctypes.c_int32 * n).from_address(src.va_addr)[:] = list(range(n))

    def double(grid, block, args):
        a, b = (ctypes.c_int32 * n).from_address(cpu(args[0])), (ctypes.c_int32 * n).from_address(cpu(args[1]))
        a[:] = [2 * x for x in b]

    KERNELS["double"] = double
    prg = dev.runtime("double", b"fake cubin")
    acquires = len(be.acquires)
    dev.hw_compute_queue_t().wait(ready, 1).exec(prg, prg.fill_kernargs((out, mid)), (1, 1, 1), (1, 1, 1)).signal(
        dev.timeline_signal, dev.next_timeline()
    ).submit(dev)
    assert be.acquires[acquires:] == [("compute", dev.gpu_va(ready.base_buf), 1)]
    dev.hw_copy_queue_t().copy(mid, src, 4 * n).signal(ready, 1).submit(dev)
    dev.synchronize()
    got = memoryview(bytearray(4 * n))
    dev.allocator._copyout(got, out)
    assert list(got.cast("i")) == [2 * i for i in range(n)]
    dev.allocator.free(src, 4 * n, BufferSpec(host=True, nolru=True))
    for b in (mid, out):
        dev.allocator.free(b, 4 * n, BufferSpec(nolru=True))


def test_launches_issued_in_place_write_the_timeline_only_when_a_gpu_waits_on_it(dev):
    be = dev.backend
    KERNELS["nop"] = lambda grid, block, args: None
    prg = dev.runtime("nop", b"fake cubin")
    dev.synchronize()
    writes = len(be.writes)
    prg(global_size=(1, 1, 1), local_size=(1, 1, 1))
    assert len(be.writes) == writes, "no memory write for a launch nothing acquires"
    # A copy queue waits for the timeline's next value, which no work sets yet: its
    # channel acquires the timeline's memory, and the launch that then sets the value
    # has its channel write it.
    done = dev.new_signal()
    target = dev.timeline_value
    tl = dev.gpu_va(dev.timeline_signal.base_buf)
    dev.hw_copy_queue_t().wait(dev.timeline_signal, target).signal(done, 1).submit(dev)
    assert be.acquires[-1] == ("copy", tl, target)
    assert [w[0] for w in be.writes[writes:]] == ["copy"], "`done`, behind the acquire"
    prg(global_size=(1, 1, 1), local_size=(1, 1, 1))
    assert be.writes[-1] == ("compute", tl, target)
    done.wait(1, timeout=1000)
    dev.synchronize()


def test_a_symbolic_signal_is_its_memory_found_by_address(dev):
    from tinygrad import Variable
    from tinygrad.runtime.support.hcq import HCQBuffer

    be = dev.backend
    gate, sig = dev.new_signal(), dev.new_signal()
    addr = Variable("gate", 0, 0xFFFFFFFFFFFFFFFF, dtypes.uint64)
    virt = dev.signal_t(base_buf=HCQBuffer(addr, 16))
    q = dev.hw_copy_queue_t().wait(virt, 3).signal(sig, 1)
    q.submit(dev, {addr.expr: gate.base_buf.va_addr})
    assert be.acquires[-1] == ("copy", dev.gpu_va(gate.base_buf), 3)
    with pytest.raises(RuntimeError, match="Wait timeout"):
        sig.wait(1, timeout=50)
    gate.value = 3
    sig.wait(1, timeout=1000)
    # Written through the symbol after work: the channel writes the memory.
    dev.hw_copy_queue_t().wait(sig, 1).signal(virt, 4).submit(dev, {addr.expr: gate.base_buf.va_addr})
    assert be.writes[-1][1:] == (dev.gpu_va(gate.base_buf), 4)
    gate.wait(4, timeout=1000)
    # With nothing before it in a fresh device's queue: the queue's own channel writes it.
    dev.synchronize()
    dev.last_done.clear()
    dev.hw_copy_queue_t().signal(virt, 6).submit(dev, {addr.expr: gate.base_buf.va_addr})
    assert be.writes[-1] == ("copy", dev.gpu_va(gate.base_buf), 6)
    gate.wait(6, timeout=1000)
    with pytest.raises(RuntimeError, match="no host memory"):
        dev.hw_copy_queue_t().wait(virt, 1).submit(dev, {addr.expr: 0x1000})


def test_another_devices_memory_is_refused_by_name(dev):
    from tinygrad.runtime.support.hcq import HCQBuffer

    foreign = HCQBuffer(0x1000, 64, owner=object())
    with pytest.raises(RuntimeError, match="cannot map memory"):
        dev.allocator.map(foreign)


def test_a_faulting_kernel_raises_with_rigs_fault_as_the_cause(dev):
    def oob(grid, block, args):
        raise MemoryError("store past the end")

    KERNELS["oob"] = oob
    prg = dev.runtime("oob", b"fake cubin")
    with pytest.raises(RuntimeError) as e:
        prg(global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
    assert isinstance(e.value.__cause__, rig.Fault), repr(e.value.__cause__)
    assert "store past the end" in str(e.value)
    # Unrecoverable for this device, as tinygrad treats a device fault.
    with pytest.raises(RuntimeError):
        dev.synchronize()
    # A host wait on a signal nothing known sets (the host or a channel behind an
    # acquire would) ends with the channel's fault, not at its timeout.
    with pytest.raises(RuntimeError) as e:
        dev.new_signal().wait(1, timeout=30000)
    assert isinstance(e.value.__cause__, rig.Fault), repr(e.value.__cause__)


def test_rigs_backend_calls_rigs_api():
    """The real backend's calls are the extension's (the GPU runs them on the H200)."""
    names = ("copy", "load", "launch", "done", "wait", "record", "event_time", "write_value", "wait_value")
    for name in (*names, "hold", "submit", "replay", "close"):
        assert hasattr(rig.Runtime, name), name
    for name in ("gpu_memory", "host", "runtime", "close", "find", "find_host"):
        assert hasattr(rig.Session, name), name


def _python(code: str, *args: str) -> str:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def test_a_tinygrad_whose_hcq_differs_is_refused_naming_what_differs():
    # HWQueue.copy as a later tinygrad might have it: the version string says nothing.
    code = (
        "import tinygrad.runtime.support.hcq as h\n"
        "h.HWQueue.copy = lambda self, dest, src, size, queue=None: self\n"
        "try:\n import rig_gpu.tinygrad\nexcept ImportError as e: print(e)\n"
    )
    out = _python(code)
    assert "HWQueue.copy takes (dest, src, size, queue), rig passes (dest, src, copy_size) first" in out, out
    assert "tinygrad (0.13.0) differs" in out, out


def test_a_tinygrad_without_metadata_or_with_another_version_string_is_checked_by_its_interface():
    code = (
        "import importlib.metadata as m\n"
        "def v(n): raise m.PackageNotFoundError(n)\n"
        "m.version = v\n"
        "import tinygrad.runtime.support.hcq as h\n"
        "del h.MMIOInterface\n"
        "try:\n import rig_gpu.tinygrad\nexcept ImportError as e: print(e)\n"
    )
    out = _python(code)
    assert "(without package metadata) differs" in out and "hcq.MMIOInterface.__init__ is missing" in out, out
    ok = "import importlib.metadata as m; m.version = lambda n: '0.13.1.dev0'\nimport rig_gpu.tinygrad; print('imported')\n"
    assert "imported" in _python(ok)


def test_python_m_rig_tinygrad_runs_a_program_on_rig(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import os, sys\n"
        "from tinygrad.device import Device\n"
        "print('DEV', os.environ['DEV'], 'RIG' in Device._devices, sys.argv[1:], __name__)\n"
    )
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "DEV"}
    out = subprocess.run(
        [sys.executable, "-m", "rig_gpu.tinygrad", str(prog), "--steps", "3"],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert out.stdout.strip() == "DEV RIG True ['--steps', '3'] __main__", out


def test_rig_gpu_defaults_to_the_gpus_rigd_serves(monkeypatch):
    monkeypatch.delenv("RIG_GPU", raising=False)
    served = [
        {"bdf": "0000:01:00.0", "health": "serving", "reason": ""},
        {"bdf": "0000:02:00.0", "health": "lost", "reason": "needs a reset"},
        {"bdf": "0000:03:00.0", "health": "serving", "reason": ""},
    ]
    monkeypatch.setattr(rig, "devices", lambda socket=None: served)
    assert rt._gpus() == ["0000:01:00.0", "0000:03:00.0"]
    monkeypatch.setattr(rig, "devices", lambda socket=None: served[1:2])
    with pytest.raises(RuntimeError, match="serves no GPU that lends now"):
        rt._gpus()
    monkeypatch.setenv("RIG_GPU", "0000:09:00.0, 0000:0a:00.0")
    assert rt._gpus() == ["0000:09:00.0", "0000:0a:00.0"]
