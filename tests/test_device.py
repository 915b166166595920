"""Problems and compressors on a torch device.

Every problem class and compressor is run twice: on the default path (CPU, plain tensors) and on
a device copy (``problem.to(device, copy=True)``, inputs created on the device). On the CPU the
results must be bitwise equal, and the copy exercises the whole moving path (shallow copy, tensors
moved, modules copied, vmap'd functions rebound). The same tests run on ``"cuda"`` when a GPU is
present, where results must match the CPU to 1e-12 (float64) or 1e-5 (float32 networks).

Besides the values, every returned tensor must be on the problem's device, and :meth:`to` must
leave no tensor behind (:func:`stray_tensors` walks the whole object): on a GPU either check
fails for a forgotten ``.to(device)``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dpnet import compression as C
from dpnet import models
from dpnet.errors import ParameterError
from dpnet.problems import LogisticRegression, NeuralProblem, NonconvexLogistic, Quadratic, SinCos
from dpnet.problems.base import Movable, canonical_device
from dpnet.problems.online import (
    LeastSquaresSamples,
    LogisticSamples,
    NeuralSamples,
    OnlineProblem,
    all_data_grad,
)
from dpnet.problems.stochastic import Clip, sample_indices
from dpnet.rng import Streams

torch.set_num_threads(1)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


# ---- walking an object for tensors ---------------------------------------------------------------

def stray_tensors(obj, device: torch.device, path: str = "problem", seen=None) -> list[str]:
    """Paths of every tensor reachable from ``obj`` (attributes, containers, nested problems and
    sample models, modules' parameters and buffers, helper objects of dpnet) that is not on
    ``device``."""
    if isinstance(obj, torch.Tensor):
        return [] if obj.device == device else [f"{path} on {obj.device}"]
    seen = set() if seen is None else seen
    if id(obj) in seen:                 # shared objects (a module and its flat view) once
        return []
    seen.add(id(obj))
    if isinstance(obj, nn.Module):
        return [f"{path}.{n} on {t.device}"
                for n, t in [*obj.named_parameters(), *obj.named_buffers()] if t.device != device]
    if isinstance(obj, tuple | list):
        items = enumerate(obj)
    elif isinstance(obj, dict):
        items = obj.items()
    elif type(obj).__module__.startswith("dpnet") and hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return []
    return [s for k, v in items for s in stray_tensors(v, device, f"{path}.{k}", seen)]


def tensors_on(device: torch.device, *values) -> None:
    """Every tensor among ``values`` (or inside their tuples, lists, dicts) is on ``device``."""
    for v in values:
        assert not stray_tensors(v, device, "result"), stray_tensors(v, device, "result")


def close(got: torch.Tensor, want: torch.Tensor, device: torch.device, atol: float) -> None:
    """Bitwise equal on the CPU; within ``atol`` (and the same relative tolerance) elsewhere."""
    assert got.device == device and got.dtype == want.dtype and got.shape == want.shape
    if device.type == "cpu":
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=atol, atol=atol)


def scalar_close(got: float, want: float, device: torch.device, atol: float) -> None:
    assert isinstance(got, float)
    assert got == want if device.type == "cpu" else got == pytest.approx(want, rel=atol, abs=atol)


# ---- problems ------------------------------------------------------------------------------------

class Scaled(nn.Module):
    """A tiny network with a buffer (which :meth:`Problem.to` must move with the parameters)."""

    def __init__(self, inputs: int = 12, classes: int = 3) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(inputs, 5), nn.Tanh(), nn.Linear(5, classes))
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x):
        return self.net(x * self.scale)


def _tiny_module(seed: int = 0) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return Scaled()


def _images(seed: int = 0, n: int = 40):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 4, generator=g), torch.randint(0, 3, (n,), generator=g)


def _logreg():
    rng = np.random.default_rng(4)
    return LogisticRegression(rng.standard_normal((4, 12, 3)), rng.choice([-1.0, 1.0], (4, 12)),
                              reg=0.1)


def _neural(**kw):
    fx, fy = _images(1)
    tx, ty = _images(2, 15)
    parts = np.arange(36).reshape(4, 9)
    return NeuralProblem(_tiny_module(), fx, fy, parts, test=(tx, ty), chunk=4, **kw)


def _online(model: str, mode: str = "exact", shared: bool = True):
    rng = np.random.default_rng(5)
    A = rng.standard_normal((24, 3))
    pools = None if shared else np.arange(24).reshape(4, 6)
    window = 2 if mode == "window" else None
    if model == "least_squares":
        m = LeastSquaresSamples(A, A @ np.array([1.0, -2.0, 0.5]), reg=0.1)
    elif model == "neural":
        fx, fy = _images(3, 24)
        m = NeuralSamples(_tiny_module(1), fx, fy, chunk=5)
    else:
        m = LogisticSamples(A, rng.choice([-1.0, 1.0], 24), reg=0.1)
    return OnlineProblem(m, 4, batch=2, pools=pools, mode=mode, window=window)


PROBLEMS = {
    "nonconvex_logistic": lambda: NonconvexLogistic.random(4, 10, 3, seed=1, lam=0.1),
    "sincos": lambda: SinCos.random(4, 3, seed=2),
    "quadratic": lambda: Quadratic.random(4, 3, seed=3),
    "logistic_regression": _logreg,
    "logistic_regression_held": lambda: _logreg().restrict([1, 3]),
    "neural": _neural,
    "neural_metric_samples": lambda: _neural(metric_samples=10),
    "neural_batchnorm": lambda: NeuralProblem(
        nn.Sequential(nn.Flatten(), nn.Linear(12, 4), nn.BatchNorm1d(4), nn.Linear(4, 3)),
        *_images(1), np.arange(36).reshape(4, 9), chunk=3),
    "online_logistic": lambda: _online("logistic"),
    "online_logistic_pools": lambda: _online("logistic", shared=False),
    "online_logistic_window": lambda: _online("logistic", "window"),
    "online_logistic_cached": lambda: _online("logistic", "cached"),
    "online_least_squares": lambda: _online("least_squares"),
    "online_neural": lambda: _online("neural", shared=False),
}
NEURAL = ("neural", "online_neural", "neural_metric_samples", "neural_batchnorm")
CLIPPED = ("logistic_regression", "logistic_regression_held", "neural", "neural_metric_samples")


def _atol(name: str) -> float:
    return 1e-5 if name.startswith(NEURAL) else 1e-12


def _on(problem, device: str):
    """The device copy: always a real copy (``copy=True``), so the CPU runs the moving path."""
    return problem.to(device, copy=True)


def _points(problem, seed: int = 0) -> torch.Tensor:
    """Host rows near the problem's start, of its dtype: one per agent it holds."""
    n = problem.n_agents if problem.held is None else problem.held.size
    x0 = problem.default_x0()[:n]
    z = np.random.default_rng(seed).standard_normal((n, problem.dim))
    return x0 + 0.1 * torch.from_numpy(z).to(x0.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_to_moves_every_tensor_and_leaves_the_original(name, device):
    p = PROBLEMS[name]()
    q = _on(p, device)
    dev = canonical_device(device)
    assert q is not p and q.device == dev and isinstance(q.device, torch.device)
    assert not stray_tensors(q, dev), stray_tensors(q, dev)
    assert not stray_tensors(p, torch.device("cpu"))      # the original stays where it was
    assert p.device == torch.device("cpu")
    assert q.to(device) is q                               # already there: no copy
    if isinstance(p, NeuralProblem):           # the vmap'd functions use the copy's module
        assert q.model is not p.model and q._flat.module is q.model
    if isinstance(getattr(p, "model", None), NeuralSamples):
        assert q.model is not p.model and q.model._flat.module is q.model.module
        assert q.model.module is not p.model.module


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_exact_methods_agree_with_the_default_path(name, device):
    p, atol = PROBLEMS[name](), _atol(name)
    q, dev = _on(p, device), canonical_device(device)
    X = _points(p)
    Xd = X.to(dev)
    agents = np.array([0, 2]) if p.held is None else p.held[1:]     # a subset, global indices
    close(q.grad(Xd), p.grad(X), dev, atol)
    close(q.local_loss(Xd), p.local_loss(X), dev, atol)
    close(q.grad(Xd[: agents.size], agents), p.grad(X[: agents.size], agents), dev, atol)
    close(q.local_loss(Xd[: agents.size], agents), p.local_loss(X[: agents.size], agents), dev,
          atol)
    close(q.default_x0(seed=3), p.default_x0(seed=3), dev, 0.0)
    close(q.check_x(X[0].numpy()), p.check_x(X[0].numpy()), dev, 0.0)         # host input
    X0 = p.default_x0(seed=1)
    close(q.check_x(X0.to(dev)), p.check_x(X0), dev, 0.0)
    if dev.type == "cpu":
        assert q.describe() == p.describe()
    else:
        assert q.describe().keys() == p.describe().keys()
    if p.held is None:
        x = X.mean(0)
        scalar_close(q.loss(x.to(dev)), p.loss(x), dev, atol)
        scalar_close(q.loss(x.numpy()), p.loss(x), dev, atol)           # host input is fine
        close(q.global_grad(x.to(dev)), p.global_grad(x), dev, atol)
    if p.smoothness != float("inf"):
        scalar_close(q.smoothness, p.smoothness, dev, 1e-10)
    if not name.startswith(NEURAL) and p.held is None:
        opt, qopt = p.optimum(), q.optimum()
        if opt is not None:
            close(qopt, opt, dev, 1e-8)     # L-BFGS: rounding may move the last iterations


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stochastic_gradients_agree_with_the_default_path(name, device):
    p, atol = PROBLEMS[name](), _atol(name)
    q, dev = _on(p, device), canonical_device(device)
    X = _points(p, seed=1)
    agents = p._agents(None) if p.held is None else p.held
    batch = p.batch if isinstance(p, OnlineProblem) else 3
    for k in range(4):                 # the online problems acquire their stream step by step
        got = q.stochastic_grad(X.to(dev), Streams(7), k, batch, agents)
        close(got, p.stochastic_grad(X, Streams(7), k, batch, agents), dev, atol)
    if name in CLIPPED:
        for clip in (Clip(0.5, "l2"), Clip(0.5, "coordinate")):
            got = q.stochastic_grad(X.to(dev), Streams(8), 2, batch, agents, clip=clip)
            close(got, p.stochastic_grad(X, Streams(8), 2, batch, agents, clip=clip), dev, atol)


@pytest.mark.parametrize("device", DEVICES)
def test_restricting_a_moved_problem_equals_moving_a_restricted_one(device):
    dev = canonical_device(device)
    for make in (_logreg, lambda: Quadratic.random(5, 3, seed=3), _neural):
        p = make()
        a = _on(p, device).restrict([0, 2])
        b = _on(p.restrict([0, 2]), device)
        assert not stray_tensors(a, dev) and not stray_tensors(b, dev)
        X, held = _points(p)[[0, 2]].to(dev), np.array([0, 2])
        close(a.grad(X, held), b.grad(X, held), dev, 0.0)
        close(a.local_loss(X, held), b.local_loss(X, held), dev, 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_neural_evaluation_and_per_sample_gradients(device):
    p = _neural()
    q, dev = _on(p, device), canonical_device(device)
    X = _points(p)
    got, want = q.evaluate(X.to(dev)), p.evaluate(X)
    assert got.keys() == want.keys()
    for key, v in want.items():
        if isinstance(v, np.ndarray):
            assert isinstance(got[key], np.ndarray)        # arrays come back on the host
            np.testing.assert_allclose(got[key], v, rtol=1e-5, atol=1e-6)
        else:
            scalar_close(got[key], v, dev, 1e-5)
    idx = torch.tensor([[0, 4], [1, 8], [2, 2], [3, 5]])    # host indices are accepted
    close(q.per_sample_grads(X.to(dev), idx), p.per_sample_grads(X, idx), dev, 1e-5)
    xb, yb = q.batch(idx, np.arange(4))
    tensors_on(dev, xb, yb)
    module = q.load_into(_tiny_module(5), X[1].to(dev))       # a host module takes a device row
    assert torch.equal(module.net[1].weight.reshape(-1), X[1, : module.net[1].weight.numel()])


@CUDA
def test_convolution_gradients_on_cuda_are_float32_not_tf32():
    # cuDNN may use TF32 for float32 convolutions (PyTorch's default): measured on an H200, the
    # vmap'd MNIST CNN's gradients then differed from the CPU's by ~1e-3 on every agent. dpnet
    # holds cuDNN to IEEE float32 inside its gradient calls and restores the user's flag after.
    rng = np.random.default_rng(0)
    n, m = 6, 40
    p = NeuralProblem(models.mnist_cnn(seed=0), rng.integers(0, 256, (n * m, 28, 28), dtype=np.uint8),
                      rng.integers(0, 10, n * m), np.arange(n * m).reshape(n, m),
                      transform=models.mnist_transform)
    q = p.to("cuda", copy=True)
    X = p.default_x0() + 0.01 * torch.randn(n, p.dim, generator=torch.Generator().manual_seed(1))
    torch.backends.cudnn.allow_tf32 = True
    for clip in (None, Clip(1.0, "coordinate")):
        want = p.stochastic_grad(X, Streams(0), 0, 16, clip=clip)
        got = q.stochastic_grad(X.to("cuda"), Streams(0), 0, 16, clip=clip).cpu()
        per_agent = (got - want).abs().amax(dim=1)
        # one agent may branch otherwise at a ReLU or max-pool near-tie (benchmarks/bench_neural.py)
        assert float(per_agent.median()) < 1e-5, per_agent.tolist()
    assert torch.backends.cudnn.allow_tf32 is True


@pytest.mark.parametrize("device", DEVICES)
def test_online_problem_memory_and_public_draws(device):
    p = _online("logistic", shared=False)
    dev = canonical_device(device)
    p.stochastic_grad(_points(p), Streams(1), 3)
    q = _on(p, device)
    assert q._mem == {} and len(p._mem) == 1            # the copy starts its own stream
    agents = np.arange(4)
    tensors_on(dev, q.sample_positions(Streams(2), 3, agents), q.sample_rows(Streams(2), 3, agents))
    assert torch.equal(q.sample_rows(Streams(2), 3, agents).cpu(),
                       p.sample_rows(Streams(2), 3, agents))
    np.testing.assert_array_equal(q.acquired_counts(Streams(2), 3), p.acquired_counts(Streams(2), 3))
    shared = _on(_online("logistic"), device)
    assert shared.pools.stride(0) == 0                 # a shared pool stays one expanded row
    fx, fy = _images(3, 24)
    net = _online("neural")
    W = net.default_x0()[:2]
    got = _on(net, device).model.evaluate(W.to(dev), fx, fy)
    want = net.model.evaluate(W, fx, fy)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6)


class _Ctx:
    def __init__(self, problem):
        self.problem, self.rng, self.agents = problem, Streams(3), np.arange(problem.n_agents)

    def grad(self, X):
        return self.problem.grad(X)


@pytest.mark.parametrize("device", DEVICES)
def test_all_data_grad_runs_on_the_device(device):
    dev = canonical_device(device)
    for p in (_online("logistic"), Quadratic.random(4, 3, seed=1)):
        q = _on(p, device)
        X = _points(p)
        close(all_data_grad(_Ctx(q), X.to(dev), 2), all_data_grad(_Ctx(p), X, 2), dev, 1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_sample_indices_are_drawn_on_the_host_and_moved(device):
    dev = canonical_device(device)
    agents = np.array([0, 3, 4])
    for batch in (1, 3):
        host = sample_indices(Streams(1), 5, agents, 10, batch)
        moved = sample_indices(Streams(1), 5, agents, 10, batch, device=device)
        assert host.device == torch.device("cpu") and moved.device == dev
        assert torch.equal(moved.cpu(), host)
    assert _logreg().to(device).sample_indices(Streams(1), 2, agents[:2], 4).device == dev


def test_to_the_same_device_returns_self_and_bad_devices_are_named():
    p = _logreg()
    assert p.to("cpu") is p and p.to(torch.device("cpu")) is p
    with pytest.raises(ParameterError, match="device="):
        p.to("no-such-device")
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="device='cuda'"):
            p.to("cuda")


def test_the_walk_finds_a_tensor_left_behind():
    """The device check of these tests is not vacuous: it sees nested tensors."""
    p = _online("neural")
    q = _on(p, "cpu")
    assert not stray_tensors(q, torch.device("cpu"))
    elsewhere = torch.device("cuda", 7)          # only compared with, never used: all listed
    paths = " ".join(stray_tensors(q, elsewhere))
    for needle in ("pools", "model.features", "model.module.net.1.weight", "model.module.scale",
                   "model._flat.buffers.scale", "model.x0"):
        assert needle in paths, needle
    assert isinstance(q.model, Movable) and q.model is not p.model


@pytest.mark.parametrize("device", DEVICES)
def test_cifar_transform_stays_on_the_input_device(device):
    dev = canonical_device(device)
    x = torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8)
    got = models.cifar_transform(x.to(dev))
    assert got.device == dev
    close(got, models.cifar_transform(x), dev, 1e-6)
    assert models.mnist_transform(x[..., 0].to(dev)).device == dev


# ---- compressors ---------------------------------------------------------------------------------

COMPRESSORS = {
    "identity": C.Identity,
    "topk": lambda: C.TopK(3),
    "topk_all": lambda: C.TopK(7),
    "randk": lambda: C.RandK(3),
    "randk_scaled": lambda: C.RandK(3, scaled=True, shared_seed=True),
    "quantizer": lambda: C.BiasedQuantizer(2),
    "quantizer_dither": lambda: C.BiasedQuantizer(3, dither=torch.linspace(0.05, 0.95, 7)),
    "normsign": C.NormSign,
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_compressors_agree_with_the_default_path(name, device, dtype):
    comp, dev = COMPRESSORS[name](), canonical_device(device)
    X = torch.from_numpy(np.random.default_rng(2).standard_normal((5, 7))).to(dtype)
    X[3] = 0.0                                      # the zero row (quantizer's C(0) = 0)
    agents = np.array([1, 2, 4, 6, 9])
    kw = {"rng": Streams(11), "purpose": "x", "k": 4, "agents": agents}
    want = comp.compress(X, **kw)
    got = comp.compress(X.to(device=dev), **kw)
    close(got, want, dev, 1e-12 if dtype == torch.float64 else 1e-6)
    # the random choices are the streams', not the device's: the same coordinates are kept
    assert torch.equal(got.cpu() != 0, want != 0)


@pytest.mark.parametrize("name", ["neural", "online_neural"])
def test_a_moved_network_computes_with_its_own_module(name):
    """The copy's vmap'd functions must evaluate the copy's module (not the original's, which a
    forgotten rebind would keep using on the original device): changing the original's buffer
    leaves the copy's gradients unchanged."""
    p = PROBLEMS[name]()
    q = _on(p, "cpu")
    X = _points(p)
    before = q.grad(X)
    module = p.model if isinstance(p, NeuralProblem) else p.model.module
    with torch.no_grad():
        module.scale.mul_(3.0)
    assert torch.equal(q.grad(X), before)
    assert not torch.equal(p.grad(X), before)
