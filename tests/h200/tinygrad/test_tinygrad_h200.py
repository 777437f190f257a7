"""tinygrad on rig on the H200 (tests/h200/compute.sh, phase `tinygrad`): run as uid
65534 with RIG_SOCKET and RIG_GPU set, tinygrad 0.13.0 and the rig wheel importable.
Every result is checked against numpy on the host."""

import numpy as np
import pytest

import rig_gpu.tinygrad
from tinygrad import Device, Tensor, TinyJit, dtypes, nn

D = "RIG"
rng = np.random.default_rng(0)


def test_the_device_is_rigs_on_sm_90():
    dev = Device[D]
    assert isinstance(dev, rig_gpu.tinygrad.RigDevice)
    assert isinstance(dev.backend, rig_gpu.tinygrad.RigBackend)
    assert dev.arch == "sm_90"
    assert dev.backend.session.gpu is not None


def test_elementwise_over_2_to_the_26_elements_element_by_element():
    n = 1 << 26
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    out = (Tensor(a, device=D) * 2 + Tensor(b, device=D)).numpy()
    np.testing.assert_array_equal(out, a * np.float32(2) + b)


def test_reductions():
    x = rng.standard_normal((512, 1000), dtype=np.float32)
    t = Tensor(x, device=D)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), x.sum(axis=1), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(t.max(axis=0).numpy(), x.max(axis=0))
    np.testing.assert_array_equal(t.argmax(axis=1).numpy(), x.argmax(axis=1))
    np.testing.assert_allclose(t.mean().item(), x.mean(), rtol=1e-4)
    np.testing.assert_allclose(t.softmax(axis=1).numpy(), np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_matmul_float32():
    a = rng.standard_normal((513, 768), dtype=np.float32)
    b = rng.standard_normal((768, 257), dtype=np.float32)
    np.testing.assert_allclose((Tensor(a, device=D) @ Tensor(b, device=D)).numpy(), a @ b, rtol=1e-3, atol=1e-3)


def test_matmul_half_on_tensor_cores():
    a = rng.standard_normal((1024, 1024)).astype(np.float16)
    b = rng.standard_normal((1024, 1024)).astype(np.float16)
    got = (Tensor(a, device=D) @ Tensor(b, device=D)).numpy().astype(np.float32)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=0.5)


def test_a_linear_models_loss_goes_down():
    x = rng.standard_normal((256, 8), dtype=np.float32)
    w_true = rng.standard_normal((8, 1), dtype=np.float32)
    y = x @ w_true + 0.5
    model = nn.Linear(8, 1)
    for p in nn.state.get_parameters(model):
        p.replace(p.to(D))
    opt = nn.optim.SGD(nn.state.get_parameters(model), lr=0.1)
    X, Y = Tensor(x, device=D), Tensor(y, device=D)
    losses = []
    with Tensor.train():
        for _ in range(50):
            opt.zero_grad()
            loss = ((model(X) - Y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[-1] < losses[0] / 100, losses[::10]
    np.testing.assert_allclose(model.weight.numpy().T, w_true, atol=0.05)


def test_a_jitted_function_replays_with_new_inputs():
    @TinyJit
    def f(a: Tensor, b: Tensor) -> Tensor:
        return (a * b + 1).realize()

    for i in range(6):
        a = rng.standard_normal(4096, dtype=np.float32)
        b = rng.standard_normal(4096, dtype=np.float32)
        out = f(Tensor(a, device=D), Tensor(b, device=D)).numpy()
        # The GPU fuses a * b + 1 into one FMA (one rounding): not numpy's two.
        np.testing.assert_allclose(out, a * b + 1, rtol=1e-5, atol=1e-6, err_msg=f"call {i}")


def test_integers_and_casts():
    x = rng.integers(-1000, 1000, 100_000).astype(np.int32)
    t = Tensor(x, device=D)
    np.testing.assert_array_equal((t * 3 - 7).numpy(), x * 3 - 7)
    np.testing.assert_array_equal(t.cast(dtypes.float32).numpy(), x.astype(np.float32))
    np.testing.assert_array_equal((t > 0).numpy(), x > 0)
