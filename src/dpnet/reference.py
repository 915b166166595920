"""Per-agent reference loops: the papers' equations, one agent at a time, in plain NumPy.

This module is the ground truth the vectorised algorithms are tested against (and the baseline
the benchmarks time). Everything is written the slow, literal way on purpose: agent i reads
``W[i, j]`` for every j it receives from (itself included when ``W[i, i] != 0``), sums, and
applies its own gradient callable. No torch, no stacked tensors, no Network.

Gradients are given per agent: ``grads[i](x, k) -> ndarray(d)`` is agent i's (possibly
stochastic) gradient at its point x in iteration k. :func:`local_gradients` builds such callables
from a problem's data with hand-written NumPy formulas (independent of the problem's own
vectorised ``grad``).

Noise is drawn from the same counter-based streams as the vectorised code: agent i's noise for
purpose ``p`` at iteration k is ``Streams(seed).laplace(p, k, [i], d)[0] * scale(i, k)`` (or
``.gaussian``), so the loop with noise on reproduces a vectorised run of the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .rng import Streams

Grad = Callable[[np.ndarray, int], np.ndarray]
ScaleFn = Callable[[int, int], float]          # (agent i, iteration k) -> noise scale


# ---- noise -------------------------------------------------------------------------------------

def geometric_scale(scale: float | Sequence[float], decay: float | Sequence[float]) -> ScaleFn:
    """``s_i * q_i**k`` (paper 000's ``Lap(s q^k)``); scalars apply to every agent."""
    s = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    q = np.atleast_1d(np.asarray(decay, dtype=np.float64))
    return lambda i, k: float(s[i if s.size > 1 else 0] * q[i if q.size > 1 else 0] ** k)


def agent_noise(rng: Streams, purpose: str, k: int, i: int, d: int, scale: float,
                kind: str = "laplace") -> np.ndarray:
    """Agent i's noise vector at iteration k: one draw of its own stream times its scale."""
    if kind == "laplace":
        z = rng.laplace(purpose, k, [i], d)[0]
    elif kind == "gaussian":
        z = rng.gaussian(purpose, k, [i], d)[0]
    else:
        raise ValueError(f"kind={kind!r} violates the condition: 'laplace' or 'gaussian'")
    return z * scale


# ---- helpers -----------------------------------------------------------------------------------

def in_neighbours(W: np.ndarray) -> list[list[int]]:
    """For every agent i, the j with ``W[i, j] != 0`` (i itself included when it self-weights)."""
    W = np.asarray(W, dtype=np.float64)
    return [[j for j in range(W.shape[1]) if W[i, j] != 0.0] for i in range(W.shape[0])]


def _weighted_sum(W: np.ndarray, nbrs: list[int], i: int, values: list[np.ndarray]) -> np.ndarray:
    acc = np.zeros_like(values[i])
    for j in nbrs:
        acc = acc + W[i, j] * values[j]
    return acc


# ---- algorithms --------------------------------------------------------------------------------

def dgd(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float, iterations: int,
        power: float = 0.0) -> np.ndarray:
    """DGD / DSGD: ``x_{i,k+1} = sum_j w_ij x_{j,k} - eta_k g_i(x_{i,k})``, ``eta_k =
    eta/(k+1)^power``. Returns the trajectory ``(iterations+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    nbrs = in_neighbours(W)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    traj = [np.stack(x)]
    for k in range(iterations):
        eta_k = eta / (k + 1.0) ** power
        new = []
        for i in range(n):
            new.append(_weighted_sum(W, nbrs[i], i, x) - eta_k * grads[i](x[i], k))
        x = new
        traj.append(np.stack(x))
    return np.stack(traj)


def gradient_tracking(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float,
                      iterations: int) -> dict[str, np.ndarray]:
    """Gradient tracking (DIGing form), noise-free:

    ``x_{i,k+1} = sum_j w_ij x_{j,k} - eta y_{i,k}``,
    ``y_{i,k+1} = sum_j w_ij y_{j,k} + grad f_i(x_{i,k+1}) - grad f_i(x_{i,k})``,
    ``y_{i,0} = grad f_i(x_{i,0})``. Returns trajectories ``x`` and ``y``, ``(K+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    nbrs = in_neighbours(W)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    g = [grads[i](x[i], 0) for i in range(n)]
    y = list(g)
    xs, ys = [np.stack(x)], [np.stack(y)]
    for k in range(iterations):
        x_new, y_new, g_new = [], [], []
        for i in range(n):
            x_new.append(_weighted_sum(W, nbrs[i], i, x) - eta * y[i])
        for i in range(n):
            g_new.append(grads[i](x_new[i], k + 1))
            y_new.append(_weighted_sum(W, nbrs[i], i, y) + g_new[i] - g[i])
        x, y, g = x_new, y_new, g_new
        xs.append(np.stack(x))
        ys.append(np.stack(y))
    return {"x": np.stack(xs), "y": np.stack(ys)}


def diadsp(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float, iterations: int,
           scale_x: ScaleFn | None = None, scale_y: ScaleFn | None = None, seed: int = 0,
           kind: str = "laplace", trajectory: bool = True) -> dict[str, np.ndarray]:
    """DiaDSP, paper 000 eqs. (8)-(11), per agent i:

    ``x^a_{i,k} = x_{i,k} + xi_{x_i,k}``, ``y^a_{i,k} = y_{i,k} + xi_{y_i,k}``        (8)-(9)
    ``x_{i,k+1} = sum_j w_ij x^a_{j,k} - eta y_{i,k}``                                (10)
    ``y_{i,k+1} = sum_j w_ij y^a_{j,k} + grad f_i(x_{i,k+1}) - grad f_i(x_{i,k})``    (11)

    with ``y_{i,0} = grad f_i(x_{i,0})``; ``xi`` drawn under purposes ``"noise_x"``/``"noise_y"``
    at scale ``scale_x(i, k)``/``scale_y(i, k)`` (``None``: no noise).

    Returns ``x``, ``y`` (``(K+1, n, d)``) and the noise ``xi_x``, ``xi_y`` (``(K, n, d)``); with
    ``trajectory=False`` only the final ``x``, ``y`` (``(n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    d = np.asarray(x0).shape[1]
    nbrs = in_neighbours(W)
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    g = [grads[i](x[i], 0) for i in range(n)]
    y = list(g)
    xs, ys, xis_x, xis_y = [np.stack(x)], [np.stack(y)], [], []
    for k in range(iterations):
        xi_x = [agent_noise(rng, "noise_x", k, i, d, scale_x(i, k), kind) if scale_x
                else np.zeros(d) for i in range(n)]
        xi_y = [agent_noise(rng, "noise_y", k, i, d, scale_y(i, k), kind) if scale_y
                else np.zeros(d) for i in range(n)]
        xa = [x[i] + xi_x[i] for i in range(n)]                                    # (8)
        ya = [y[i] + xi_y[i] for i in range(n)]                                    # (9)
        x_new = [_weighted_sum(W, nbrs[i], i, xa) - eta * y[i] for i in range(n)]   # (10)
        g_new = [grads[i](x_new[i], k + 1) for i in range(n)]
        y_new = [_weighted_sum(W, nbrs[i], i, ya) + g_new[i] - g[i] for i in range(n)]  # (11)
        x, y, g = x_new, y_new, g_new
        if trajectory:
            xs.append(np.stack(x))
            ys.append(np.stack(y))
            xis_x.append(np.stack(xi_x))
            xis_y.append(np.stack(xi_y))
    if not trajectory:
        return {"x": np.stack(x), "y": np.stack(y)}
    empty = np.zeros((0, n, d))
    return {"x": np.stack(xs), "y": np.stack(ys),
            "xi_x": np.stack(xis_x) if xis_x else empty,
            "xi_y": np.stack(xis_y) if xis_y else empty}


# ---- per-agent gradients of the built-in problems, by hand ------------------------------------

def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def nonconvex_logistic_grad(V: np.ndarray, u: np.ndarray, lam: float, alpha: float) -> Grad:
    """Agent gradient of ``(1/m) sum_j log(1 + exp(-u_j x^T v_j)) + sum_s lam alpha x_s^2 /
    (1 + alpha x_s^2)`` (paper 000 eq. (37)); V: (m, d), u: (m,)."""
    V, u = np.asarray(V, dtype=np.float64), np.asarray(u, dtype=np.float64)

    def grad(x: np.ndarray, k: int = 0) -> np.ndarray:
        z = u * (V @ x)
        data = -(V.T @ (u * _sigmoid(-z))) / len(u)
        return data + 2.0 * lam * alpha * x / (1.0 + alpha * x * x) ** 2

    return grad


def quadratic_grad(A: np.ndarray, b: np.ndarray) -> Grad:
    """Agent gradient of ``1/2 x^T A x - b^T x``."""
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return lambda x, k=0: A @ x - b


def sincos_grad(m_i: float) -> Grad:
    """Agent gradient of paper 000's (38): ``x^T x + 3 sin(x)^T sin(x) + m_i x^T cos(x)``."""
    return lambda x, k=0: 2 * x + 6 * np.sin(x) * np.cos(x) + m_i * (np.cos(x) - x * np.sin(x))


def logistic_grad(A: np.ndarray, b: np.ndarray, reg: float, agent: int = 0,
                  batch_size: int | None = None, seed: int = 0, purpose: str = "sample") -> Grad:
    """Agent gradient of ``(1/m) sum_j log(1 + exp(-b_j a_j^T x)) + reg/2 ||x||^2``; with
    ``batch_size`` the average over that many distinct local samples drawn from the agent's own
    stream (``Streams(seed)`` under ``purpose``, as :class:`~dpnet.problems.LogisticRegression`)."""
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    m = len(b)
    rng = Streams(seed)

    def grad(x: np.ndarray, k: int = 0) -> np.ndarray:
        if batch_size is None:
            idx = np.arange(m)
        else:
            idx = minibatch(rng, purpose, k, agent, m, batch_size)
        Ab, bb = A[idx], b[idx]
        s = _sigmoid(-bb * (Ab @ x))
        return -(Ab.T @ (bb * s)) / len(idx) + reg * x

    return grad


def minibatch(rng: Streams, purpose: str, k: int, agent: int, m: int,
              batch_size: int) -> np.ndarray:
    """Agent ``agent``'s ``batch_size`` distinct sample indices at iteration k: one uniform index
    when ``batch_size == 1``, else the ``batch_size`` smallest of m random sort keys."""
    if batch_size == 1:
        u = rng.uniform(purpose, k, [agent], 1)[0, 0]
        return np.array([min(int(u * m), m - 1)])
    keys = rng.permutation_keys(purpose, k, [agent], m)[0]
    return np.sort(np.argsort(keys, kind="stable")[:batch_size])


def local_gradients(problem, batch_size: int | None = None, seed: int = 0) -> list[Grad]:
    """Per-agent gradient callables of a built-in problem from its data, by hand (NumPy).

    ``batch_size`` applies to :class:`~dpnet.problems.LogisticRegression` (DSGD's minibatches);
    the other problems have exact gradients only."""
    from .problems import LogisticRegression, NonconvexLogistic, Quadratic, SinCos

    n = problem.n_agents
    if isinstance(problem, NonconvexLogistic):
        V, u = problem.V.numpy(), problem.u.numpy()
        return [nonconvex_logistic_grad(V[i], u[i], problem.lam, problem.alpha) for i in range(n)]
    if isinstance(problem, Quadratic):
        A, b = problem.A.numpy(), problem.b.numpy()
        return [quadratic_grad(A[i], b[i]) for i in range(n)]
    if isinstance(problem, SinCos):
        return [sincos_grad(float(problem.m[i])) for i in range(n)]
    if isinstance(problem, LogisticRegression):
        A, b = problem.A.numpy(), problem.b.numpy()
        return [logistic_grad(A[i], b[i], problem.reg, i, batch_size, seed) for i in range(n)]
    raise TypeError(f"no hand-written gradient for {type(problem).__name__}")
