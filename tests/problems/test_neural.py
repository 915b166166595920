"""NeuralProblem (vmap'd gradients of all agents), per-sample clipping, models, and the logistic
regression extensions (clipped per-sample gradients, reg = 1/m)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from dpnet import data, models
from dpnet.errors import ParameterError
from dpnet.problems import Clip, LogisticRegression, NeuralProblem
from dpnet.problems.stochastic import (
    clipped_grad_sum,
    clipped_stochastic_grad,
    poisson_indices,
    sample_indices,
)
from dpnet.rng import Streams

FIX = Path(__file__).parents[1] / "data"
# one intra-op thread: several test workers share two cores, and idle OpenMP threads spinning
# on a busy machine cost several times the useful work
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def mnist_problem():
    train = data.load_mnist("train", root=FIX, verify=False, download=False)
    test = data.load_mnist("test", root=FIX, verify=False, download=False)
    return NeuralProblem.from_dataset(models.mnist_cnn(seed=1), train, 3, test=test,
                                      transform=models.mnist_transform, chunk=7)


def _loop_grads(problem, X, idx, agents, clip=None):
    """One module copy per agent, plain autograd, one sample (clip) or one batch at a time."""
    out = []
    for r, i in enumerate(agents):
        module = problem.load_into(copy.deepcopy(problem.model), X[r])
        xb, yb = problem.batch(idx[r:r + 1], np.array([i]))
        xb, yb = xb[0], yb[0]
        if clip is None:
            module.zero_grad()
            nn.functional.cross_entropy(module(xb), yb).backward()
            out.append(torch.cat([p.grad.reshape(-1) for p in module.parameters()]))
        else:
            per = []
            for s in range(len(yb)):
                module.zero_grad()
                nn.functional.cross_entropy(module(xb[s:s + 1]), yb[s:s + 1]).backward()
                per.append(clip.apply(torch.cat([p.grad.reshape(-1) for p in module.parameters()])))
            out.append(torch.stack(per).mean(0))
    return torch.stack(out)


def test_vmap_gradients_equal_per_agent_loop(mnist_problem):
    p = mnist_problem
    rng = Streams(4)
    noise = torch.randn(p.n_agents, p.dim, generator=torch.Generator().manual_seed(0))
    X = p.default_x0() + 0.01 * noise
    agents = np.arange(p.n_agents)
    idx = sample_indices(rng, 3, agents, p.m, 5)
    G = p.stochastic_grad(X, rng, 3, 5)
    torch.testing.assert_close(G, _loop_grads(p, X, idx, agents), rtol=1e-4, atol=1e-6)
    for clip in (Clip(0.5, "coordinate"), Clip(0.5, "l2")):
        Gc = p.stochastic_grad(X, rng, 3, 5, clip=clip)
        torch.testing.assert_close(Gc, _loop_grads(p, X, idx, agents, clip), rtol=1e-4, atol=1e-6)
    # a subset of agents draws exactly its own rows' samples
    sub = np.array([2, 0])
    torch.testing.assert_close(p.stochastic_grad(X[sub], rng, 3, 5, sub), G[sub])


def test_the_weighted_clipped_sum_equals_the_per_record_loop(mnist_problem):
    # DP-SGD's Poisson sum: records of weight 0 (padding) are skipped on the CPU, computed and
    # zeroed by the nested call elsewhere; both equal one module copy per record
    p = mnist_problem
    X = p.default_x0() + 0.01 * torch.randn(p.n_agents, p.dim,
                                            generator=torch.Generator().manual_seed(1))
    agents = np.arange(p.n_agents)
    idx, included = poisson_indices(Streams(5), 2, agents, p.m, 0.3)
    weights = included.double() * torch.tensor([[0.5], [1.0], [2.0]], dtype=torch.float64)
    weights[1] = 0.0                           # an agent with an empty batch sums to zero
    for clip in (Clip(0.5, "coordinate"), Clip(0.5, "l2")):
        got = clipped_grad_sum(p, X, idx, weights, clip, agents)
        for r in agents:
            keep = weights[r] != 0
            if not keep.any():
                assert torch.all(got[r] == 0)
                continue
            per = _loop_grads(p, X[r:r + 1], idx[r:r + 1][:, keep], [r], clip) * keep.sum()
            # the loop averages clipped records of weight 1; rescale to the weighted sum
            loop = per[0] * float(weights[r][keep][0])
            torch.testing.assert_close(got[r], loop.to(got.dtype), rtol=1e-4, atol=1e-6)
        # the generic nested path (a GPU's) gives the same sum
        nested = clip.weighted_sum(p.per_sample_grads_at(X, idx, agents), weights)
        torch.testing.assert_close(got, nested, rtol=1e-4, atol=1e-6)
    # a subset of agents gets its own rows
    sub = np.array([2, 0])
    torch.testing.assert_close(clipped_grad_sum(p, X[sub], idx[sub], weights[sub], clip, sub),
                               got[sub])


def test_full_gradient_loss_and_evaluation(mnist_problem):
    p = mnist_problem
    X = p.default_x0()
    full = torch.arange(p.m).expand(p.n_agents, -1)
    torch.testing.assert_close(p.grad(X), _loop_grads(p, X, full, np.arange(p.n_agents)),
                               rtol=1e-4, atol=1e-6)
    loss = p.local_loss(X)
    module = p.load_into(copy.deepcopy(p.model), X[0])
    xb, yb = p.batch(full[:1], np.array([0]))
    with torch.no_grad():
        ref = float(nn.functional.cross_entropy(module(xb[0]), yb[0]))
    assert float(loss[0]) == pytest.approx(ref, rel=1e-5)
    ev = p.evaluate(X)
    tx, ty = p.test
    with torch.no_grad():
        acc = float((module(models.mnist_transform(tx)).argmax(1) == ty).double().mean())
    assert ev["test_accuracy"] == pytest.approx(acc) and ev["test_accuracy_agents"].shape == (3,)
    assert ev["train_loss"] == pytest.approx(float(loss.mean()), rel=1e-5)
    torch.testing.assert_close(p.global_grad(X[0]), p.grad(X).mean(0), rtol=1e-4, atol=1e-6)


def test_training_decreases_loss(mnist_problem):
    p = mnist_problem
    X = p.default_x0()
    rng = Streams(0)
    before = p.loss(X[0])
    for k in range(25):
        X = X - 0.1 * p.stochastic_grad(X, rng, k, 8)
    assert p.loss(X.mean(0)) < 0.8 * before


def test_clip_properties():
    g = torch.tensor([[3.0, -4.0, 0.0, 0.1]])
    c = Clip(1.0, "coordinate").apply(g)
    assert torch.allclose(c, torch.tensor([[0.5, -0.5, 0.0, 0.1]]))
    l2 = Clip(1.0, "l2").apply(g)
    assert float(torch.linalg.vector_norm(l2)) == pytest.approx(1.0)
    assert Clip(2.0, "coordinate").l2_bound(100, 25) == pytest.approx(1.0)
    assert Clip(2.0, "l2").l2_bound(100, 25) == 2.0
    with pytest.raises(ParameterError):
        Clip(1.0, "linf")
    with pytest.raises(ParameterError):
        Clip(0.0, "l2")


def test_logistic_clipped_per_sample_and_reg():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 20, 6))
    b = rng.choice([-1.0, 1.0], (3, 20))
    p = LogisticRegression(A, b, reg="1/m")
    assert p.reg == pytest.approx(1 / 20)
    X = torch.from_numpy(rng.standard_normal((3, 6)))
    streams = Streams(2)
    idx = p.sample_indices(streams, 5, np.arange(3), 4)
    clip = Clip(0.3, "coordinate")
    G = clipped_stochastic_grad(p, X, streams, 5, 4, np.arange(3), clip=clip)
    for i in range(3):
        per = []
        for j in idx[i].tolist():
            a, y = A[i, j], b[i, j]
            g = -y * a / (1 + math.exp(y * a @ X[i].numpy())) + p.reg * X[i].numpy()
            per.append(np.clip(g, -0.3 / math.sqrt(6), 0.3 / math.sqrt(6)))
        np.testing.assert_allclose(G[i].numpy(), np.mean(per, 0), rtol=1e-12)
    # unclipped minibatch gradient = mean of per-sample gradients
    BA = torch.gather(p.BA, 1, idx[:, :, None].expand(-1, -1, 6))
    np.testing.assert_allclose(p.stochastic_grad(X, streams, 5, 4).numpy(),
                               p.per_sample_grads(BA, X).mean(1).numpy(), rtol=1e-12)


def test_clip_refused_without_per_sample_gradients():
    from dpnet.problems import Quadratic

    q = Quadratic.random(n_agents=2, dim=3)
    with pytest.raises(ParameterError, match="per-sample"):
        clipped_stochastic_grad(q, torch.zeros(2, 3), Streams(0), 0, 1, np.arange(2),
                                clip=Clip(1.0, "l2"))


def test_models_shapes_and_seeded_init():
    m = models.mnist_cnn(seed=3)
    assert sum(p.numel() for p in m.parameters()) == 7194
    state = torch.random.get_rng_state()
    m2 = models.mnist_cnn(seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), m2.parameters()))
    x = torch.randint(0, 255, (2, 5, 28, 28), dtype=torch.uint8)
    assert models.mnist_transform(x).shape == (2, 5, 1, 28, 28)
    assert m(models.mnist_transform(x[0])).shape == (5, 10)
    c = models.cifar_cnn()
    xc = torch.randint(0, 255, (4, 32, 32, 3), dtype=torch.uint8)
    assert c(models.cifar_transform(xc)).shape == (4, 10)
    assert sum(p.numel() for p in c.parameters()) == 122570
