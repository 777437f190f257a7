"""GPU time alone, RIG beside CUDA in one process on the device machine (run by
tests/h200/compute.sh as TG_SCRIPT=tests/h200/tinygrad/gpu_time.py, in phase
`tinygrad`): what the GPU spends on a graph, without the host's part.

- A TinyJit'd GPT-2-sized forward (bench.py's) queued behind a 3 ms spinning kernel,
  so the GPU never waits for the host, timed by GPU events around it: rig's
  `Runtime.record`/`elapsed` on RIG, `cuEventRecord`/`cuEventElapsedTime` on CUDA.
- A rig graph of 60 and of 1,000 empty kernels, replayed behind the same spin: GPU
  time and the host's time in `replay`, per kernel (RIG only; CuPy's CUDA graph is
  beside it in tests/h200/python, `test_figures`).

Prints `gpu_time ...` and `emptygraph ...` lines; medians of 35 and 21."""

import ctypes
import statistics
import time

import rig_gpu as rig
import rig_gpu.tinygrad  # noqa: F401  (registers RIG)
from bench import jit_forward  # tests/h200/tinygrad/bench.py
from tinygrad import Device
from tinygrad.device import BufferSpec

SPIN = (
    'extern "C" __global__ void rig_spin(unsigned long long* out, int us) {'
    " unsigned long long t0, t;"
    ' asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));'
    ' do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); }'
    " while (t - t0 < (unsigned long long)us * 1000ull); out[0] = t; }"
)
EMPTY = 'extern "C" __global__ void rig_empty(float* a) {}'


def events(d: str):
    """(record, elapsed in µs) on device `d`'s own stream or compute channel."""
    if d == "RIG":
        rt = Device[d].backend.runtime
        return (lambda: rt.record("compute")), (lambda a, b: rt.elapsed(a, b) / 1e3)
    from tinygrad.runtime.autogen import cuda

    pair = [cuda.CUevent() for _ in range(2)]
    for e in pair:
        cuda.cuEventCreate(ctypes.byref(e), 0)
    turn = [0]

    def record():
        e = pair[turn[0] % 2]
        turn[0] += 1
        cuda.cuEventRecord(e, None)  # tinygrad's CUDA device launches on stream 0
        return e

    def elapsed(a, b):
        cuda.cuEventSynchronize(b)
        ms = ctypes.c_float()
        cuda.cuEventElapsedTime(ctypes.byref(ms), a, b)
        return ms.value * 1e3

    return record, elapsed


def gpt2_gpu_us(d: str, seqlen: int) -> float:
    dev = Device[d]
    spin = dev.runtime("rig_spin", dev.compiler.compile(SPIN))
    buf = dev.allocator.alloc(8, BufferSpec())
    step, tokens, _ = jit_forward(d, seqlen)
    for _ in range(10):
        step(tokens)
        dev.synchronize()
    record, elapsed = events(d)
    ts = []
    for _ in range(40):
        dev.synchronize()
        spin(buf, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(3000,))
        a = record()
        step(tokens)
        b = record()
        dev.synchronize()
        ts.append(elapsed(a, b))
    return statistics.median(ts[5:])


def empty_graphs() -> None:
    dev = Device["RIG"]
    rt = dev.backend.runtime
    k = dev.runtime("rig_empty", dev.compiler.compile(EMPTY)).kernel
    spin = dev.runtime("rig_spin", dev.compiler.compile(SPIN)).kernel
    buf = dev.allocator.alloc(64, BufferSpec())
    va = dev.gpu_va(buf)
    for n in (60, 1000):  # fewer, then more, than a template's 64 slots
        g = rig.Graph()
        for _ in range(n):
            g.add(k, 1, 1, [va])
        for _ in range(3):
            rt.wait(rt.replay(g))
        for mode in ("once", "early"):
            gpu, host = [], []
            for _ in range(21):
                rt.launch(spin, 1, 1, [va, 2000])
                a = rt.record()
                t0 = time.perf_counter_ns()
                rt.replay(g, submit=mode)
                t1 = time.perf_counter_ns()
                b = rt.record()
                gpu.append(rt.elapsed(a, b) / 1000 / n)
                host.append((t1 - t0) / 1000 / n)
            print(
                f"emptygraph n {n} {mode} gpu_us_each {statistics.median(gpu):.3f}"
                f" host_us_each {statistics.median(host):.3f}",
                flush=True,
            )


def main() -> None:
    empty_graphs()
    for seqlen in (1, 128):
        r = {d: gpt2_gpu_us(d, seqlen) for d in ("RIG", "CUDA")}
        for d, us in r.items():
            print(f"gpu_time seq{seqlen} {d} median {us:.1f} us", flush=True)
        print(f"gpu_time seq{seqlen} ratio rig/cuda {r['RIG'] / r['CUDA']:.3f}", flush=True)


if __name__ == "__main__":
    main()
