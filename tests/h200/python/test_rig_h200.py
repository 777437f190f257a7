"""rig from Python on the H200 (device machine): the `rig` wheel in a process of uid
65534, against a rigd that serves the GPU through its driver (tests/h200/compute.sh,
phase `python`, starts both). Kernels come from rig-cubin's fixture cubin; every result
is checked with numpy; one session takes a deliberate fault. CuPy, in the same call,
runs the same cubin for the side-by-side figures (`test_figures`, printed with -s)."""

import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import rig_gpu as rig

SOCKET = os.environ["RIG_SOCKET"]
GPU = os.environ["RIG_GPU"]
CUBIN_PATH = os.environ["RIG_CUBIN"]
with open(CUBIN_PATH, "rb") as f:
    CUBIN = f.read()
MIB = 1 << 20


@pytest.fixture(scope="module")
def session():
    s = rig.Session(GPU, socket=SOCKET)
    yield s
    s.close()


@pytest.fixture(scope="module")
def rt(session):
    r = session.runtime()
    yield r
    r.close()


@pytest.fixture(scope="module")
def mod(rt):
    return rt.load(CUBIN)


def test_an_unprivileged_process(session):
    assert os.getuid() == 65534 and os.geteuid() == 65534
    g = session.gpu
    assert g is not None and g["sms"] == 132, g


def test_saxpy_over_a_million_elements(session, rt, mod):
    n = 1 << 20
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 3.0, dtype=np.float32)
    hx, hy = session.host(4 * n), session.host(4 * n)
    np.frombuffer(hx, dtype=np.float32)[:] = x
    np.frombuffer(hy, dtype=np.float32)[:] = y
    gx, gy = session.gpu_memory(4 * n), session.gpu_memory(4 * n)
    rt.copy(gx, hx)
    rt.wait(rt.copy(gy, hy))
    rt.wait(rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[2.0, gx, gy, n]))
    rt.wait(rt.copy(hy, gy))
    got = np.frombuffer(hy, dtype=np.float32)
    assert np.array_equal(got, 2.0 * x + y)
    for b in (gx, gy):
        b.free()


def test_every_thread_of_a_3d_grid_writes_its_element(session, rt, mod):
    grid, block = (37, 11, 3), (8, 4, 2)
    n = 37 * 11 * 3 * 8 * 4 * 2
    out = session.gpu_memory(4 * n)
    rt.wait(rt.fill(out, 0))
    rt.wait(rt.launch(mod["grid_fill"], grid=grid, block=block, args=[out]))
    h = session.host(4 * n)
    rt.wait(rt.copy(h, out))
    i = np.arange(n, dtype=np.uint64)
    want = ((i * 2654435761 + 1) & 0xFFFFFFFF).astype(np.uint32)
    assert np.array_equal(np.frombuffer(h, dtype=np.uint32), want)
    out.free()


def test_a_reduction_with_dynamic_shared_memory(session, rt, mod):
    n = 1 << 20
    data = (np.arange(n, dtype=np.uint64) % 1000).astype(np.uint32)
    h = session.host(4 * n)
    np.frombuffer(h, dtype=np.uint32)[:] = data
    g = session.gpu_memory(4 * n)
    total = session.gpu_memory(8)
    rt.copy(g, h)
    rt.wait(rt.fill(total, 0))
    rt.wait(rt.launch(mod["reduce_sum"], grid=n // 512, block=512, args=[g, total, n], shared=512 * 4))
    out = session.host(8)
    rt.wait(rt.copy(out, total))
    assert int(np.frombuffer(out, dtype=np.uint64)[0]) == int(data.sum(dtype=np.uint64))


def test_copies_in_every_direction_at_64_mib(session, rt):
    n = 64 * MIB
    src = session.host(n)
    pattern = np.random.default_rng(7).integers(0, 255, n, dtype=np.uint8)
    np.frombuffer(src, dtype=np.uint8)[:] = pattern
    a, b = session.gpu_memory(n), session.gpu_memory(n)
    up = rt.copy(a, src)
    rt.wait(rt.copy(b, a, after=[up]))  # GPU to GPU: the copy kernel, after the upload
    dst = session.host(n)
    rt.wait(rt.copy(dst, b))
    assert np.array_equal(np.frombuffer(dst, dtype=np.uint8), pattern)
    for x in (a, b):
        x.free()


def _saxpy_buffers(session, rt, n):
    """x = 0, 1, … n - 1 in host memory and uploaded to GPU memory (gx), waited for;
    a host and a GPU buffer of n floats for y. Returns (x, hx, hy, gx, gy)."""
    x = np.arange(n, dtype=np.float32)
    hx, hy = session.host(4 * n), session.host(4 * n)
    gx, gy = session.gpu_memory(4 * n), session.gpu_memory(4 * n)
    np.frombuffer(hx, dtype=np.float32)[:] = x
    rt.wait(rt.copy(gx, hx))
    return x, hx, hy, gx, gy


def test_the_gpu_orders_copies_and_kernels_given_after(session, rt, mod):
    # Upload, saxpy, download: each waits for the one before on the GPU, the host only
    # for the last; every round's factor is different, so a stale read shows. Below
    # 2^24 / 9 elements every r * x + r is exact in float32 (the kernel's FMA and
    # numpy's two roundings agree).
    n = 1 << 20
    x, hx, hy, gx, gy = _saxpy_buffers(session, rt, n)
    for r in range(1, 9):
        np.frombuffer(hy, dtype=np.float32)[:] = float(r)
        up = rt.copy(gy, hy)
        k = rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[np.float32(r), gx, gy, n], after=[up])
        rt.wait(rt.copy(hy, gy, after=[k]))
        assert np.array_equal(np.frombuffer(hy, dtype=np.float32), r * x + r), r
    for b in (gx, gy):
        b.free()


def test_numpy_arrays_go_up_and_down_in_one_call(session, rt):
    # 96 MiB: two staging rounds each way.
    a = np.random.default_rng(3).standard_normal(24 * MIB).astype(np.float32)
    g = session.gpu_memory(a.nbytes)
    rt.upload(g, a)
    back = np.empty_like(a)
    assert rt.download(g, out=back) is back
    assert np.array_equal(back, a)
    assert rt.download(g.va + 4, size=8) == a[1:3].tobytes()
    with pytest.raises(ValueError):
        rt.upload(g, a, offset=4)  # past its end: nothing copied
    with pytest.raises(TypeError):
        rt.download(g, out=bytes(8))  # read-only
    g.free()


def test_events_time_gpu_work_on_either_engine(session, rt, mod):
    flag = session.gpu_memory(4)
    a = rt.record()
    rt.launch(mod["spin"], 1, 1, args=[np.uint64(2_000_000), flag])  # about 1 ms of clocks
    b = rt.record()
    t0 = time.perf_counter_ns()
    ns = rt.elapsed(a, b)
    assert 100_000 < ns < 100_000_000, ns
    assert rt.event_time(b) - rt.event_time(a) == ns
    # The copy engine: 64 MiB host to GPU memory, about 1.2 ms at 55 GB/s.
    n = 64 * MIB
    src, dst = session.host(n), session.gpu_memory(n)
    c0 = rt.record("copy")
    rt.copy(dst, src)
    c1 = rt.record("copy")
    copy_ns = rt.elapsed(c0, c1)
    assert 200_000 < copy_ns < 50_000_000, copy_ns
    print(f"\nevents: spin kernel {ns} ns, 64 MiB upload {copy_ns} ns ({n / copy_ns:.1f} GB/s); host read {time.perf_counter_ns() - t0} ns")
    with pytest.raises(ValueError):
        rt.elapsed(b, a)
    for x in (flag, dst):
        x.free()


def test_copies_and_fills_by_gpu_address(session, rt):
    g = session.gpu_memory(2 * MIB)
    h = session.host(2 * MIB)
    region = session.find(g.va + 4096)
    assert region is not None and not region.host and region.va <= g.va
    assert session.find_host(np.frombuffer(h, dtype=np.uint8).ctypes.data) == session.find(h.va)
    f = rt.fill(g.va, 0x01020304, size=2 * MIB)
    np.frombuffer(h, dtype=np.uint8)[:] = 0
    rt.wait(rt.copy(h.va + 64, g.va + 4096, size=8192, after=[f]))
    got = np.frombuffer(h, dtype=np.uint32)
    assert (got[16 : 16 + 2048] == 0x01020304).all() and got[15] == 0 and got[16 + 2048] == 0
    with pytest.raises(ValueError):
        rt.copy(h.va, 0x1000, size=8)  # no lease of the session there
    other = session.runtime()
    with pytest.raises(ValueError):
        other.wait(f)  # another runtime's Done
    other.close()
    g.free()


def test_values_in_memory_are_written_by_the_engines_and_hold_them_until_set(session, rt, mod):
    # rt.write_value / rt.wait_value (docs/compute.md, "Values in memory"): the
    # engine writes a value and its time into host memory after its work; a channel
    # waits on the GPU for a value the host, or the other channel, sets.
    sig = session.host(4096)
    words = np.frombuffer(sig, dtype=np.uint64)
    words[:] = 0
    n = 1 << 20
    x, hx, hy, gx, gy = _saxpy_buffers(session, rt, n)

    # Written after a kernel, with the GPU's time between two events around it.
    a = rt.record()
    k = rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[np.float32(2), gx, gy, n])
    w = rt.write_value(sig, 7, after=[k])
    b = rt.record()
    rt.wait(w)
    assert words[0] == 7
    assert rt.event_time(a) <= words[1] <= rt.event_time(b), (rt.event_time(a), words[1], rt.event_time(b))

    # Held by the GPU until the host sets the value: the kernel behind the acquire has
    # not run 50 ms later; once set, it runs, and what it wrote is right.
    np.frombuffer(hy, dtype=np.float32)[:] = 1.0
    up = rt.copy(gy, hy)
    gate = rt.wait_value(sig, 1, offset=16)
    try:
        k = rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[np.float32(3), gx, gy, n], after=[up])
        time.sleep(0.05)
        assert not rt.done(gate) and not rt.done(k), "held by the acquire"
        with pytest.raises(rig.Timeout):
            rt.wait(k, timeout=0.05)
    finally:
        words[2] = 1  # never leave the module's runtime held
    rt.wait(rt.copy(hy, gy, after=[k]))
    assert np.array_equal(np.frombuffer(hy, dtype=np.float32), 3 * x + 1)

    # One channel waits for what the other writes: the copy channel's download waits
    # on the value the compute channel writes behind a kernel.
    k = rt.launch(mod["saxpy"], grid=(n + 255) // 256, block=256, args=[np.float32(1), gx, gy, n])
    rt.write_value(sig, 5, offset=32, after=[k])
    rt.wait_value(sig, 5, engine="copy", offset=32)
    rt.wait(rt.copy(hy, gy))
    assert np.array_equal(np.frombuffer(hy, dtype=np.float32), 4 * x + 1)

    # Refused before anything is sent: a misaligned place, one outside the session's
    # memory, one too short for the value and its time.
    with pytest.raises(ValueError):
        rt.write_value(sig, 1, offset=8)
    with pytest.raises(ValueError):
        rt.wait_value(0x1000, 1)
    with pytest.raises(ValueError):
        rt.write_value(sig, 1, offset=4096 - 8)
    for m in (gx, gy, hx, hy, sig):
        m.free()


def test_a_wait_past_its_timeout_raises_and_a_later_wait_succeeds(session, rt, mod):
    done_flag = session.gpu_memory(4)
    # About 1 s of SM clocks (the H200 boosts to 1.98 GHz).
    d = rt.launch(mod["spin"], grid=1, block=32, args=[2_000_000_000, done_flag])
    with pytest.raises(rig.Timeout):
        rt.wait(d, timeout=0.05)
    rt.wait(d, timeout=30)


def test_a_wait_releases_the_gil(session, rt, mod):
    flag = session.gpu_memory(4)
    d = rt.launch(mod["spin"], grid=1, block=32, args=[1_000_000_000, flag])
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=count)
    t.start()
    t0 = time.monotonic()
    rt.wait(d, timeout=30)
    waited = time.monotonic() - t0
    stop.set()
    t.join()
    assert waited > 0.2, waited
    assert ticks > 100_000, f"{ticks} loop turns in {waited:.2f} s: the GIL was held"


def test_a_blocked_wait_sleeps_until_the_gpus_interrupt(session, rt, mod):
    # About half a second of SM clocks: a spinning wait would burn as much CPU.
    flag = session.gpu_memory(4)
    assert rt.wait_policy == "spin_then_block"
    assert rt.spin_then_block_s == pytest.approx(200e-6)
    rt.wait_policy = "block"
    try:
        d = rt.launch(mod["spin"], grid=1, block=32, args=[1_000_000_000, flag])
        t0, c0 = time.monotonic(), time.thread_time()
        rt.wait(d, timeout=30)
        waited, cpu = time.monotonic() - t0, time.thread_time() - c0
        assert waited > 0.2, waited
        assert cpu < waited / 10, f"{cpu:.3f} s of CPU in a {waited:.3f} s wait"
    finally:
        rt.spin_then_block_s = 200e-6
    assert rt.wait_policy == "spin_then_block"
    with pytest.raises(ValueError):
        rt.wait_policy = "sometimes"


def test_an_event_loop_waits_on_the_wake_descriptor(session, rt, mod):
    import asyncio

    flag = session.gpu_memory(4)

    async def main():
        d = rt.launch(mod["spin"], grid=1, block=32, args=[500_000_000, flag])
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        t = asyncio.ensure_future(tick())
        t0 = time.monotonic()
        await rig.wait_async(rt, d, timeout=30)
        waited = time.monotonic() - t0
        t.cancel()
        return waited, ticks

    waited, ticks = asyncio.run(main())
    assert waited > 0.1, waited
    # The loop went on while the GPU worked: about one tick a millisecond.
    assert ticks > waited * 300, f"{ticks} ticks in {waited:.3f} s"
    d = rt.launch(mod["spin"], grid=1, block=32, args=[1000, flag])
    assert rt.wake_fd(d) is not None, "rigd lends a wake descriptor on a real GPU"
    rt.wait(d, timeout=30)


def test_a_graph_replays_in_order_and_the_host_sees_every_launchs_writes(session, rt, mod):
    # 41 saxpy launches of 2^20 elements per replay: 33 add x (ones) to y in GPU memory,
    # each after the one before; 8 between them add x to a host buffer of their own.
    # y says whether each grid saw the one before it (chained through its QMD), and the
    # host buffers, read the moment the last launch's value lands, whether every
    # grid's writes to host memory were visible by then.
    n = 1 << 20
    saxpy, grid = mod["saxpy"], (n + 255) // 256
    ones, y = session.host(4 * n), session.gpu_memory(4 * n)
    x = session.gpu_memory(4 * n)
    np.frombuffer(ones, dtype=np.float32)[:] = 1.0
    rt.wait(rt.copy(x, ones))
    rt.wait(rt.fill(y, 0))
    hosts = [session.host(4 * n) for _ in range(8)]
    for h in hosts:
        np.frombuffer(h, dtype=np.float32)[:] = 0.0
    g = rig.Graph()
    for i in range(32):
        g.add(saxpy, grid, 256, [1.0, x, y, n])
        if i % 4 == 3:
            g.add(saxpy, grid, 256, [1.0, x, hosts[i // 4], n])
    g.add(saxpy, grid, 256, [1.0, x, y, n])
    assert len(g) == 41
    for r in range(1, 13):
        rt.wait(rt.replay(g, submit="once" if r % 2 else "early"))
        late = [k for k, h in enumerate(hosts) if not np.all(np.frombuffer(h, dtype=np.float32) == r)]
        assert not late, f"replay {r}: host buffers {late} not yet written when the last launch landed"
    rt.wait(rt.copy(ones, y))
    assert np.all(np.frombuffer(ones, dtype=np.float32) == 12 * 33)
    # Patched: the last launch adds to a second buffer from now on, the rest as before.
    y2 = session.gpu_memory(4 * n)
    rt.wait(rt.fill(y2, 0))
    g.set_arg(40, 2, y2)
    rt.wait(rt.replay(g))
    rt.wait(rt.copy(ones, y))
    assert np.all(np.frombuffer(ones, dtype=np.float32) == 13 * 33 - 1)
    rt.wait(rt.copy(ones, y2))
    assert np.all(np.frombuffer(ones, dtype=np.float32) == 1.0)
    with pytest.raises(IndexError):
        g.set_arg(41, 0, 1.0)
    with pytest.raises(rig.LaunchError):
        g.set_arg(0, 3, b"\0" * 4)  # n is 8 bytes
    with pytest.raises(ValueError):
        g.set_arg(0, 0, 2**40)  # a is a float: 4 bytes
    for b in (x, y, y2, ones, *hosts):
        b.free()


def test_a_second_runtime_is_a_stream_that_waits_for_the_first_on_the_gpu(session, rt):
    # rt's upload, then rt2's saxpy after it by an exported fence: no host wait between.
    n = 1 << 20
    with session.runtime() as rt2:
        m2 = rt2.load(CUBIN)
        h, out = session.host(4 * n), session.host(4 * n)
        x, y = session.gpu_memory(4 * n), session.gpu_memory(4 * n)
        for value in (1.5, 2.5, 3.5, 4.5):
            np.frombuffer(h, dtype=np.float32)[:] = value
            rt2.wait(rt2.fill(y, 0))
            up = rt.copy(x, h)
            k = rt2.launch(m2["saxpy"], grid=n // 256, block=256, args=[2.0, x, y, n], after=[rt.export(up)])
            rt2.wait(rt2.copy(out, y, after=[k]))
            assert np.all(np.frombuffer(out, dtype=np.float32) == 2.0 * value)
            rt.wait(up)
        for b in (x, y):
            b.free()


def test_a_grid_syncs_in_a_cooperative_launch_and_too_large_a_grid_is_refused(session, rt):
    # coop.cu beside the launch fixture: grid_sum syncs its grid twice.
    path = os.path.join(os.path.dirname(CUBIN_PATH), "coop.sm_90.cubin")
    with open(path, "rb") as f:
        coop = rt.load(f.read())
    n = (1 << 20) + 7
    data = (np.arange(n, dtype=np.uint64) * 7 % 1000).astype(np.uint32)
    h = session.host(4 * n)
    np.frombuffer(h, dtype=np.uint32)[:] = data
    x = session.gpu_memory(4 * n)
    partial, total, agree = session.gpu_memory(8 * 2048), session.gpu_memory(8), session.gpu_memory(4 * 2048)
    rt.wait(rt.copy(x, h))
    sms = session.gpu["sms"]
    for grid in (sms, 2 * sms):
        rt.wait(rt.fill(total, 0))
        rt.wait(rt.fill(agree, 0))
        args = [x, n, partial, total, agree]
        rt.wait(rt.launch(coop["grid_sum"], grid=grid, block=256, args=args, cooperative=True))
        out = session.host(8 + 4 * grid)
        rt.copy(out, total, size=8)
        rt.wait(rt.copy(out, agree, size=4 * grid, dst_offset=8))
        got = np.frombuffer(out, dtype=np.uint64, count=1)[0]
        assert int(got) == int(data.sum(dtype=np.uint64))
        assert np.all(np.frombuffer(out, dtype=np.uint32, offset=8) == 1), "every block saw the sum"
    # 2,048 blocks of 1,024 threads: 2 an SM hold at once, so far more than the GPU holds.
    with pytest.raises(rig.LaunchError, match="cannot be resident at once"):
        rt.launch(coop["grid_sum"], grid=2048, block=1024, args=[x, n, partial, total, agree], cooperative=True)
    for b in (x, partial, total, agree):
        b.free()


def test_bad_arguments_are_refused_before_anything_runs(rt, mod):
    with pytest.raises(ValueError):
        rt.launch(mod["saxpy"], grid=1, block=32, args=[1.0])
    with pytest.raises(TypeError):
        rt.launch(mod["saxpy"], grid=1, block=32, args=[1.0, "x", "y", 1])
    with pytest.raises(rig.LaunchError):
        rt.launch(mod["empty"], grid=1, block=4096)
    with pytest.raises(KeyError):
        mod.kernel("no_such_kernel")


def test_a_fault_is_typed_and_stays_in_its_session():
    # A session of its own: its channel group stops; the module's session goes on.
    with rig.Session(GPU, socket=SOCKET) as s:
        r = s.runtime()
        assert repr(r).startswith(f"<rig.Runtime of session {s.id}: compute channel "), repr(r)
        m = r.load(CUBIN)
        d = r.launch(m["store_at"], grid=1, block=1, args=[0x10, 7])
        with pytest.raises(rig.Fault) as e:
            r.wait(d, timeout=10)
        assert e.value.fault, e.value
        print(f"\nfault: {e.value}")


CUPY = """
import statistics, sys, time
import cupy as cp
m = cp.RawModule(path=sys.argv[1])
f = m.get_function("empty")
dev = cp.cuda.Device()
for _ in range(200):
    f((1,), (1,), ()); dev.synchronize()
v = []
for _ in range(5000):
    t0 = time.perf_counter_ns(); f((1,), (1,), ()); dev.synchronize()
    v.append((time.perf_counter_ns() - t0) / 1000)
print("launch_sync_us", statistics.median(v))
b = []
for _ in range(20):
    t0 = time.perf_counter_ns()
    for _ in range(1000):
        f((1,), (1,), ())
    t1 = time.perf_counter_ns(); dev.synchronize()
    b.append((t1 - t0) / 1000 / 1000)
print("host_per_launch_us", statistics.median(b))
n = 256 << 20
host = cp.cuda.alloc_pinned_memory(n)
g = cp.cuda.alloc(n)
for name, dst, src, kind in (("h2d", g.ptr, host.ptr, 1), ("d2h", host.ptr, g.ptr, 2)):
    t = []
    for _ in range(7):
        t0 = time.perf_counter_ns(); cp.cuda.runtime.memcpy(dst, src, n, kind); dev.synchronize()
        t.append((time.perf_counter_ns() - t0) / 1e9)
    print(name + "_gbs", n / statistics.median(t) / 1e9)
# A CUDA graph of 60 empty kernels (stream capture), replayed behind a spinning
# kernel so the GPU never waits for the host: GPU time per kernel between events, and
# the host's time in the launch call, per kernel.
N = 60
s = cp.cuda.Stream(non_blocking=True)
s.begin_capture()
for _ in range(N):
    f((1,), (1,), (), stream=s)
graph = s.end_capture()
spin, flag = m.get_function("spin"), cp.zeros(1, dtype=cp.uint32)
for _ in range(3):
    graph.launch(s); s.synchronize()
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
gpu, host = [], []
for _ in range(21):
    spin((1,), (1,), (cp.uint64(2_000_000), flag), stream=s)
    e0.record(s); t0 = time.perf_counter_ns(); graph.launch(s); t1 = time.perf_counter_ns(); e1.record(s)
    e1.synchronize()
    gpu.append(cp.cuda.get_elapsed_time(e0, e1) * 1000 / N); host.append((t1 - t0) / 1000 / N)
print("graph_gpu_us", statistics.median(gpu))
print("graph_host_us", statistics.median(host))
"""


def test_figures(session, rt, mod):
    """From Python, side by side in one call: rig (this process) against CuPy over
    libcuda (another process of the same uid, the same cubin and CPU): an empty kernel's
    launch + completion, the host's time per launch in a batch, and 256 MiB copies
    between pinned host memory and GPU memory each way."""
    cupy = subprocess.run(
        [sys.executable, "-c", CUPY, CUBIN_PATH], capture_output=True, text=True, timeout=300
    )
    cu = {}
    if cupy.returncode == 0:
        for line in cupy.stdout.splitlines():
            k, v = line.split()
            cu[k] = float(v)
    else:
        print(f"\nCuPy did not run: {cupy.stderr.strip()[-400:]}")
    k = mod["empty"]
    for _ in range(200):
        rt.wait(rt.launch(k, 1, 1))
    rig_us = []
    for _ in range(5000):
        t0 = time.perf_counter_ns()
        rt.wait(rt.launch(k, 1, 1))
        rig_us.append((time.perf_counter_ns() - t0) / 1000)
    batch = []
    for _ in range(20):
        t0 = time.perf_counter_ns()
        for _ in range(1000):
            d = rt.launch(k, 1, 1)
        t1 = time.perf_counter_ns()
        rt.wait(d)
        batch.append((t1 - t0) / 1000 / 1000)
    n = 256 * MIB
    h, g = session.host(n), session.gpu_memory(n)
    gbs = {}
    for name, dst, src in (("h2d", g, h), ("d2h", h, g)):
        t = []
        for _ in range(7):
            t0 = time.perf_counter_ns()
            rt.wait(rt.copy(dst, src))
            t.append((time.perf_counter_ns() - t0) / 1e9)
        gbs[name] = n / statistics.median(t) / 1e9
    g.free()
    h.free()
    # rig's graph of 60 empty kernels, replayed behind the spinning kernel as CuPy's:
    # fewer than a template's 64 slots, so the replay never waits for the GPU to free
    # one (docs/compute.md, "Graphs").
    N = 60
    graph, flag = rig.Graph(), session.gpu_memory(4)
    for _ in range(N):
        graph.add(k, 1, 1)
    for _ in range(3):
        rt.wait(rt.replay(graph))
    ggpu, ghost = [], []
    for _ in range(21):
        rt.launch(mod["spin"], 1, 1, args=[np.uint64(2_000_000), flag])
        a = rt.record()
        t0 = time.perf_counter_ns()
        rt.replay(graph)
        t1 = time.perf_counter_ns()
        b = rt.record()
        ggpu.append(rt.elapsed(a, b) / 1000 / N)
        ghost.append((t1 - t0) / 1000 / N)
    flag.free()

    def row(what, mine, theirs, unit):
        ratio = f"{mine / theirs:.2f}x" if theirs else "-"
        print(f"{what:<44} rig {mine:9.3f} {unit:<5} CuPy {theirs or float('nan'):9.3f} {unit:<5} {ratio}")

    print()
    row("empty launch + wait (median of 5000)", statistics.median(rig_us), cu.get("launch_sync_us"), "us")
    row("host time per launch (batches of 1000)", statistics.median(batch), cu.get("host_per_launch_us"), "us")
    row("256 MiB host -> GPU (median of 7)", gbs["h2d"], cu.get("h2d_gbs"), "GB/s")
    row("256 MiB GPU -> host (median of 7)", gbs["d2h"], cu.get("d2h_gbs"), "GB/s")
    row("graph of 60 empty kernels: GPU time each", statistics.median(ggpu), cu.get("graph_gpu_us"), "us")
    row("graph of 60 empty kernels: host time each", statistics.median(ghost), cu.get("graph_host_us"), "us")
