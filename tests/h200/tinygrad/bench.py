"""tinygrad on rig beside tinygrad on CUDA (libcuda), in one process on the H200, one
measurement of each in turn: a kernel's launch + sync, host time per launch, a 4096 x
4096 matmul, 256 MiB to and from the GPU, and a TinyJit'd forward of a GPT-2-sized
transformer with random weights (tinygrad's own `extra/models/llama.py`, from the
tests' tree at TG_SRC). Medians; prints `figure rig cuda ratio`."""

import os
import statistics
import sys
import time

import numpy as np

import rig_gpu.tinygrad  # noqa: F401  (registers RIG)
from tinygrad import Context, Device, Tensor
from tinygrad.device import BufferSpec

EMPTY = 'extern "C" __global__ void rig_empty(float* a) {}'


def program(d: str):
    dev = Device[d]
    lib = dev.compiler.compile(EMPTY)
    return dev, dev.runtime("rig_empty", lib), dev.allocator.alloc(4, BufferSpec())


def launch_sync(dev, prg, buf, n=2000):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        prg(buf, global_size=(1, 1, 1), local_size=(1, 1, 1))
        dev.synchronize()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1000


def host_per_launch(dev, prg, buf, n=1000, runs=21):
    ts = []
    for _ in range(runs):
        dev.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            prg(buf, global_size=(1, 1, 1), local_size=(1, 1, 1))
        ts.append((time.perf_counter_ns() - t0) / n)
        dev.synchronize()
    return statistics.median(ts) / 1000


def matmul_check(d, n=4096):
    """The product is right (rows checked against numpy), and which kernels tinygrad
    ran for it, with their times (DEBUG=2)."""
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((n, n), dtype=np.float32)
    b_np = rng.standard_normal((n, n), dtype=np.float32)
    with Context(DEBUG=2):
        c = (Tensor(a_np, device=d) @ Tensor(b_np, device=d)).numpy()
    rows = [0, 1, 2047, 4095]
    np.testing.assert_allclose(c[rows], a_np[rows] @ b_np, rtol=2e-3, atol=2e-2)
    print(f"tinygrad matmul_4096 on {d}: rows {rows} match numpy", flush=True)


def matmul_ms(d, n=4096, runs=15):
    a = Tensor.rand(n, n, device=d).realize()
    b = Tensor.rand(n, n, device=d).realize()
    dev = Device[d]
    ts = []
    for _ in range(runs):
        dev.synchronize()
        t0 = time.perf_counter_ns()
        (a @ b).realize()
        dev.synchronize()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts[3:]) / 1e6


def copies_gbs(d, host: np.ndarray, runs=9):
    dev = Device[d]
    h2d, d2h = [], []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        t = Tensor(host, device=d).realize()
        dev.synchronize()
        h2d.append(time.perf_counter_ns() - t0)
        t0 = time.perf_counter_ns()
        out = t.numpy()
        d2h.append(time.perf_counter_ns() - t0)
        assert out[12345] == host[12345]
        del t
    gb = host.nbytes / 1e9
    return gb / (statistics.median(h2d) / 1e9), gb / (statistics.median(d2h) / 1e9)


# GPT-2 small's sizes: 12 layers of 768 wide, 12 heads, a 3072-wide MLP, 50,257 tokens.
GPT2 = dict(dim=768, hidden_dim=3072, n_heads=12, n_layers=12, norm_eps=1e-5, vocab_size=50257)


def jit_forward(d: str, seqlen: int):
    """A TinyJit'd forward (to the next token, greedy) of the transformer on device `d`,
    and its input: the model made once per device and length, its weights random."""
    if (src := os.environ.get("TG_SRC", ".dev/tinygrad/src")) not in sys.path:
        sys.path.insert(0, src)
    from extra.models.llama import Transformer
    from tinygrad import TinyJit
    from tinygrad.nn.state import get_parameters

    with Context(DEV=d):
        model = Transformer(**GPT2, max_context=128, jit=False, disable_kv_cache=True)
        for p in get_parameters(model):
            p.realize()
        tokens = Tensor.randint(1, seqlen, low=0, high=GPT2["vocab_size"]).realize()
    step = TinyJit(lambda t: model.forward(t, 0, 0.0, 0, 0.0, 0.0, 0.0).realize())
    return step, tokens, []


def jit_step_ms(d, made, runs=30):
    """The JIT'd step's median time, call to synchronized (ms), and on the side
    (`made[2]`) the median time the call itself took to return: the host's part, which
    the GPU's work overlaps only where the device submits before the call returns."""
    step, tokens, host_ms = made
    dev = Device[d]
    ts, hs = [], []
    for _ in range(runs):
        dev.synchronize()
        t0 = time.perf_counter_ns()
        step(tokens)
        t1 = time.perf_counter_ns()
        dev.synchronize()
        ts.append(time.perf_counter_ns() - t0)
        hs.append(t1 - t0)
    if not getattr(step, "told", False):
        step.told = True
        calls, kernels, graphs = jit_calls(step)
        print(f"tinygrad gpt2 on {d}: the JIT runs {calls} calls, {kernels} of them in {graphs} graphs", flush=True)
    host_ms.append(statistics.median(hs[5:]) / 1e6)
    return statistics.median(ts[5:]) / 1e6  # the first calls capture the JIT


def jit_calls(step):
    """The captured JIT's calls, and how many of them run inside graphs, in how many."""
    from tinygrad.uop.ops import Ops

    calls = graphed = graphs = 0
    for call in step.captured.linear.src:
        ast = call.src[0]
        if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph":
            n = len(ast.src[0].src)
            calls, graphed, graphs = calls + n, graphed + n, graphs + 1
        else:
            calls += 1
    return calls, graphed, graphs


def main() -> int:
    pairs = {d: program(d) for d in ("RIG", "CUDA")}
    rows = []

    def both(name, f, unit, higher_is_better=False):
        r = {d: [] for d in pairs}
        for _ in range(3):  # alternate, so drift hits both
            for d in pairs:
                r[d].append(f(d))
        rig_v, cuda_v = statistics.median(r["RIG"]), statistics.median(r["CUDA"])
        rows.append((name, rig_v, cuda_v, rig_v / cuda_v, unit))
        print(f"tinygrad {name} rig {rig_v:.3f} cuda {cuda_v:.3f} {unit} ratio {rig_v / cuda_v:.3f}", flush=True)

    def gpt2() -> None:
        for seqlen in (1, 128):
            made = {d: jit_forward(d, seqlen) for d in pairs}
            # The two devices' next tokens agree only up to float rounding: not compared.
            both(f"gpt2_jit_forward_seq{seqlen}_ms", lambda d: jit_step_ms(d, made[d]), "ms")
            host = {d: statistics.median(made[d][2]) for d in pairs}
            print(
                f"tinygrad gpt2_jit_forward_seq{seqlen}_host_ms rig {host['RIG']:.3f} cuda {host['CUDA']:.3f} ms"
                f" ratio {host['RIG'] / host['CUDA']:.3f} (the call's own time, before the sync)",
                flush=True,
            )
            submits(seqlen, made["RIG"])
            del made

    def submits(seqlen, made) -> None:
        """RIG's graphs sent in one submission and early (RIG_GRAPH_SUBMIT), in turn."""
        dev = Device["RIG"]
        if not hasattr(dev, "graph_submit"):
            return
        was, r, h = dev.graph_submit, {"once": [], "early": []}, {"once": [], "early": []}
        for _ in range(3):
            for m in r:
                dev.graph_submit = m
                made[2].clear()
                r[m].append(jit_step_ms("RIG", made))
                h[m].append(made[2][-1])
        dev.graph_submit = was
        t = {m: statistics.median(v) for m, v in r.items()}
        hm = {m: statistics.median(v) for m, v in h.items()}
        print(
            f"tinygrad gpt2_jit_forward_seq{seqlen}_ms RIG graphs once {t['once']:.3f} early {t['early']:.3f} ms"
            f" (host {hm['once']:.3f}, {hm['early']:.3f}) early/once {t['early'] / t['once']:.3f}",
            flush=True,
        )

    if os.environ.get("TG_BENCH_ONLY") == "gpt2":  # the transformer's figures alone
        gpt2()
        return 0
    both("launch_sync_us", lambda d: launch_sync(*pairs[d]), "us")
    both("host_per_launch_us", lambda d: host_per_launch(*pairs[d]), "us")
    for d in pairs:
        matmul_check(d)
    both("matmul_4096_f32_ms", matmul_ms, "ms")
    gpt2()
    host = np.arange(64 << 20, dtype=np.float32)  # 256 MiB
    cp = {d: [] for d in pairs}
    for _ in range(3):
        for d in pairs:
            cp[d].append(copies_gbs(d, host))
    for i, name in enumerate(("copy_h2d_256MiB_GBs", "copy_d2h_256MiB_GBs")):
        rig_v = statistics.median(x[i] for x in cp["RIG"])
        cuda_v = statistics.median(x[i] for x in cp["CUDA"])
        print(f"tinygrad {name} rig {rig_v:.2f} cuda {cuda_v:.2f} GB/s ratio {rig_v / cuda_v:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
