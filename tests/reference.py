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

from dpnet.rng import Streams

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
    return [np.flatnonzero(W[i]).tolist() for i in range(W.shape[0])]


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
    from dpnet.problems import LogisticRegression, NonconvexLogistic, Quadratic, SinCos

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


# ---- paper 003 (Chen, Wang & Zhang): DP gradient tracking over directed graphs ------------------

def directed_dpgt(R: np.ndarray, C: np.ndarray, grads: Sequence[Grad], x0: np.ndarray,
                  alpha: float, beta: float, gamma: float, iterations: int,
                  scale_x: ScaleFn | None = None, scale_y: ScaleFn | None = None, seed: int = 0,
                  form: str = "compact") -> dict[str, np.ndarray]:
    """Algorithm 1 of paper 003, agent by agent. ``R[i, j] > 0``: i receives j's state; ``C[i, j]
    > 0``: i receives j's tracking variable (diagonals ignored). With ``x^_j = x_j + zeta_j`` and
    ``y^_j = y_j + eta_j`` (purposes ``"noise_x"``, ``"noise_y"``):

    ``form="per-agent"``, eqs. (4) and (6):
    ``x_i' = (1 - alpha sum_{j != i} R_ij) x_i + alpha sum_{j != i} R_ij x^_j - gamma y_i``,
    ``y_i' = (1 - beta sum_{j != i} C_ij) y_i + beta sum_{j != i} C_ij y^_j + g_i' - g_i``.

    ``form="compact"``, eqs. (7)-(8) written per agent:
    ``x_i' = x_i - alpha sum_{j != i} R_ij (x^_i - x^_j) - gamma y_i``,
    ``y_i' = y_i - beta [(sum_{j != i} C_ji) y^_i - sum_{j != i} C_ij y^_j] + g_i' - g_i``.

    ``g_i = grads[i](x_i, k)`` at iteration k, ``y_i(0) = g_i(0)``. Returns trajectories ``x``,
    ``y``, ``g`` (``(K+1, n, d)``)."""
    R, C = np.asarray(R, dtype=np.float64), np.asarray(C, dtype=np.float64)
    n, d = R.shape[0], np.asarray(x0).shape[1]
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    g = [grads[i](x[i], 0) for i in range(n)]
    y = [gi.copy() for gi in g]
    xs, ys, gs = [np.stack(x)], [np.stack(y)], [np.stack(g)]
    for k in range(iterations):
        zeta = [agent_noise(rng, "noise_x", k, i, d, scale_x(i, k)) if scale_x else np.zeros(d)
                for i in range(n)]
        eta = [agent_noise(rng, "noise_y", k, i, d, scale_y(i, k)) if scale_y else np.zeros(d)
               for i in range(n)]
        xh = [x[i] + zeta[i] for i in range(n)]
        yh = [y[i] + eta[i] for i in range(n)]
        x_new, y_new, g_new = [], [], []
        for i in range(n):
            acc = np.zeros(d)
            row = 0.0
            for j in range(n):
                if j != i and R[i, j] != 0.0:
                    row += R[i, j]
                    acc += R[i, j] * (xh[i] - xh[j] if form == "compact" else xh[j])
            if form == "compact":
                x_new.append(x[i] - alpha * acc - gamma * y[i])                          # (7)
            else:
                x_new.append((1.0 - alpha * row) * x[i] + alpha * acc - gamma * y[i])    # (4)
        for i in range(n):
            g_new.append(grads[i](x_new[i], k + 1))
            acc = np.zeros(d)
            row = col = 0.0
            for j in range(n):
                if j != i and C[i, j] != 0.0:
                    row += C[i, j]
                    acc += C[i, j] * yh[j]
                if j != i and C[j, i] != 0.0:
                    col += C[j, i]
            if form == "compact":
                y_new.append(y[i] - beta * (col * yh[i] - acc) + g_new[i] - g[i])        # (8)
            else:
                y_new.append((1.0 - beta * row) * y[i] + beta * acc + g_new[i] - g[i])   # (6)
        x, y, g = x_new, y_new, g_new
        xs.append(np.stack(x))
        ys.append(np.stack(y))
        gs.append(np.stack(g))
    return {"x": np.stack(xs), "y": np.stack(ys), "g": np.stack(gs)}


# ---- paper 004 (Ou et al.): DPP2 -------------------------------------------------------------

def dpp2(P: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, alpha: float, beta: float,
         rho: float, etas: Sequence[float], iterations: int, scale_w: ScaleFn | None = None,
         scale_e: ScaleFn | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """DPP2, Algorithm 1 of paper 004, per agent i (sums over j in N_i and i, ``p_ij != 0``):

    ``y_i^k = x_i^k + (1 - eta^k) d_i^k + w_i^k``                                  (line 6)
    ``z_i^k = grad f_i(x_i^k) + eta^k q_i^k + rho sum_j p_ij y_j^k + e_i^k``       (line 7)
    ``x_i^{k+1} = x_i^k + w_i^k - alpha (z_i^k - e_i^k) + beta sum_j p_ij z_j^k``  (line 8)
    ``d_i^{k+1} = eta^k d_i^k + y_i^k``, ``q_i^{k+1} = eta^k q_i^k + rho sum_j p_ij y_j^k``

    from ``d_i^0 = q_i^0 = 0``; ``w``, ``e`` drawn under purposes ``"noise_w"``/``"noise_e"`` at
    scales ``scale_w(i, k)``/``scale_e(i, k)`` (``None``: no noise). Returns ``x``, ``d``, ``q``
    (``(K+1, n, d)``) and the messages ``y``, ``z`` and noises ``w``, ``e`` (``(K, n, d)``)."""
    P = np.asarray(P, dtype=np.float64)
    n, dim = np.asarray(x0).shape
    nbrs = in_neighbours(P)
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    d = [np.zeros(dim) for _ in range(n)]
    q = [np.zeros(dim) for _ in range(n)]
    out: dict[str, list] = {k: [] for k in ("x", "d", "q", "y", "z", "w", "e")}
    out["x"].append(np.stack(x))
    out["d"].append(np.stack(d))
    out["q"].append(np.stack(q))
    for k in range(iterations):
        eta = float(etas[k])
        w = [agent_noise(rng, "noise_w", k, i, dim, scale_w(i, k)) if scale_w else np.zeros(dim)
             for i in range(n)]
        e = [agent_noise(rng, "noise_e", k, i, dim, scale_e(i, k)) if scale_e else np.zeros(dim)
             for i in range(n)]
        y = [x[i] + (1.0 - eta) * d[i] + w[i] for i in range(n)]                         # line 6
        Py = [_weighted_sum(P, nbrs[i], i, y) for i in range(n)]
        z = [grads[i](x[i], k) + eta * q[i] + rho * Py[i] + e[i] for i in range(n)]       # line 7
        x = [x[i] + w[i] - alpha * (z[i] - e[i]) + beta * _weighted_sum(P, nbrs[i], i, z)
             for i in range(n)]                                                           # line 8
        d = [eta * d[i] + y[i] for i in range(n)]                                         # line 9
        q = [eta * q[i] + rho * Py[i] for i in range(n)]                                  # line 10
        for key, val in (("x", x), ("d", d), ("q", q), ("y", y), ("z", z), ("w", w), ("e", e)):
            out[key].append(np.stack(val))
    return {k: np.stack(v) if v else np.zeros((0, n, dim)) for k, v in out.items()}


def dpp2_compact(P: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, alpha: float,
                 beta: float, rho: float, w: np.ndarray, e: np.ndarray) -> dict[str, np.ndarray]:
    """Compact recursion (20)-(21) of paper 004, ``L = P (x) I_d`` and ``G = alpha I - beta L``:

    ``x^{k+1} = x^k + w^k - G(grad f(x^k) + q^k + rho L (x^k + w^k)) + beta L e^k``   (20)
    ``q^{k+1} = q^k + rho L (x^k + w^k)``                                            (21)

    with ``q^0 = 0`` and the given noises ``w``, ``e`` of shape ``(K, n, d)`` (no eta^k appears).
    Stacked rows: ``L v`` is ``P @ V``. Returns ``x`` and ``q``, ``(K+1, n, d)``."""
    P = np.asarray(P, dtype=np.float64)
    n = P.shape[0]
    G = alpha * np.eye(n) - beta * P
    x = np.array(x0, dtype=np.float64)
    q = np.zeros_like(x)
    xs, qs = [x], [q]
    for k in range(len(w)):
        g = np.stack([grads[i](x[i], k) for i in range(n)])
        xw = x + w[k]
        x, q = xw - G @ (g + q + rho * P @ xw) + beta * P @ e[k], q + rho * P @ xw       # (20)-(21)
        xs.append(x)
        qs.append(q)
    return {"x": np.stack(xs), "q": np.stack(qs)}


# ---- paper 000's compressed algorithms: PGTC and PPDC (Xie et al.) -----------------------------

Compress = Callable[[np.ndarray, int, int, str], np.ndarray]   # (vector, agent, iteration, name)


def compressor(kind: str, k: int = 2, bits: int = 2, dither: np.ndarray | None = None,
               seed: int = 0) -> Compress:
    """Paper 000's compressors on one vector, literally (§V):

    * ``"identity"``;
    * ``"topk"`` (C1): keep the k coordinates largest in magnitude;
    * ``"quantizer"`` (C2): ``(||x||/xi) sign(x) 2^{-(b-1)} floor(2^{b-1}|x|/||x|| + u)`` with
      ``xi = 1 + min(d/2^{2(b-1)}, sqrt(d)/2^{b-1})`` and ``C(0) = 0``; ``u`` is ``dither`` when
      given, else agent i's draw ``Streams(seed).uniform("compress/<name>/dither", k, [i], d)``;
    * ``"normsign"`` (C3): ``(||x||_inf / 2) sign(x)`` (a zero coordinate sent as +)."""

    def identity(v, i, it, name):
        return np.array(v, dtype=np.float64)

    def topk(v, i, it, name):
        out = np.zeros_like(v)
        idx = np.argsort(-np.abs(v), kind="stable")[:k]
        out[idx] = v[idx]
        return out

    def quantizer(v, i, it, name):
        d = v.size
        norm = float(np.sqrt(np.sum(v * v)))
        if norm == 0.0:
            return np.zeros_like(v)
        s = 2.0 ** (bits - 1)
        xi = 1.0 + min(d / s**2, np.sqrt(d) / s)
        u = (np.asarray(dither, dtype=np.float64) if dither is not None
             else Streams(seed).uniform(f"compress/{name}/dither", it, [i], d)[0])
        return (norm / xi) * np.sign(v) * np.floor(s * np.abs(v) / norm + u) / s

    def normsign(v, i, it, name):
        return 0.5 * np.max(np.abs(v)) * np.where(v >= 0, 1.0, -1.0)

    table = {"identity": identity, "topk": topk, "quantizer": quantizer, "normsign": normsign}
    if kind not in table:
        raise ValueError(f"kind={kind!r} violates the condition: one of {sorted(table)}")
    return table[kind]


def _neighbours_only(W: np.ndarray) -> list[list[int]]:
    """N_i: the j != i with ``w_ij != 0`` (paper 000's neighbour sets; w_ii plays no role)."""
    return [[j for j in row if j != i] for i, row in enumerate(in_neighbours(W))]


def _noise_vectors(rng: Streams, purpose: str, k: int, n: int, d: int,
                   scale: ScaleFn | None) -> list[np.ndarray]:
    return [agent_noise(rng, purpose, k, i, d, scale(i, k)) if scale else np.zeros(d)
            for i in range(n)]


def pgtc(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float, gamma: float,
         alpha_x: float, alpha_y: float, compress: Compress, iterations: int,
         scale_x: ScaleFn | None = None, scale_y: ScaleFn | None = None,
         seed: int = 0) -> dict[str, np.ndarray]:
    """PGTC, paper 000 Algorithm 1, per agent i (each holder i keeps its own copies
    ``x^c[i][j]``, ``y^c[i][j]`` of every j in ``N_i + {i}``):

    ``x^a_i = x_i + xi_{x_i}``, ``y^a_i = y_i + xi_{y_i}``                                 (8)-(9)
    agent j broadcasts ``cx_j = C(x^a_j - x^c_j)``, ``cy_j = C(y^a_j - y^c_j)``
    holder i: ``x_hat_j = x^c[i][j] + cx_j``, ``y_hat_j = y^c[i][j] + cy_j``              (14)-(15)
    ``x_i <- x^a_i + gamma sum_{j in N_i} w_ij (x_hat_j - x_hat_i) - eta y_i``                (12)
    ``y_i <- y^a_i + gamma sum_{j in N_i} w_ij (y_hat_j - y_hat_i) + grad f_i(x_i^+) -
    grad f_i(x_i)``                                                                           (13)
    ``x^c[i][j] <- (1-alpha_x) x^c[i][j] + alpha_x x_hat_j`` (y^c with alpha_y)            (16)-(17)

    ``x^c = y^c = 0`` and ``y_i = grad f_i(x_i)`` initially; noise under purposes
    ``"noise_x"``/``"noise_y"``, compression under message names ``"x"``/``"y"``. Returns ``x``,
    ``y`` (``(K+1, n, d)``), the noise ``xi_x``, ``xi_y`` and the messages ``cx``, ``cy``
    (``(K, n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = _neighbours_only(W)
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    g = [grads[i](x[i], 0) for i in range(n)]
    y = list(g)
    xc = [{j: np.zeros(d) for j in [i, *nb[i]]} for i in range(n)]
    yc = [{j: np.zeros(d) for j in [i, *nb[i]]} for i in range(n)]
    out: dict[str, list] = {"x": [np.stack(x)], "y": [np.stack(y)], "xi_x": [], "xi_y": [],
                            "cx": [], "cy": []}
    for k in range(iterations):
        xi_x = _noise_vectors(rng, "noise_x", k, n, d, scale_x)
        xi_y = _noise_vectors(rng, "noise_y", k, n, d, scale_y)
        xa = [x[i] + xi_x[i] for i in range(n)]                                       # (8)
        ya = [y[i] + xi_y[i] for i in range(n)]                                       # (9)
        cx = [compress(xa[j] - xc[j][j], j, k, "x") for j in range(n)]
        cy = [compress(ya[j] - yc[j][j], j, k, "y") for j in range(n)]
        x_new, y_new, g_new = [], [], []
        for i in range(n):
            xh = {j: xc[i][j] + cx[j] for j in xc[i]}                                 # (14)
            yh = {j: yc[i][j] + cy[j] for j in yc[i]}                                 # (15)
            sx, sy = np.zeros(d), np.zeros(d)
            for j in nb[i]:
                sx = sx + W[i, j] * (xh[j] - xh[i])
                sy = sy + W[i, j] * (yh[j] - yh[i])
            x_new.append(xa[i] + gamma * sx - eta * y[i])                             # (12)
            g_new.append(grads[i](x_new[i], k + 1))
            y_new.append(ya[i] + gamma * sy + g_new[i] - g[i])                        # (13)
            for j in xc[i]:
                xc[i][j] = (1 - alpha_x) * xc[i][j] + alpha_x * xh[j]                 # (16)
                yc[i][j] = (1 - alpha_y) * yc[i][j] + alpha_y * yh[j]                 # (17)
        x, y, g = x_new, y_new, g_new
        for key, val in (("x", x), ("y", y), ("xi_x", xi_x), ("xi_y", xi_y), ("cx", cx),
                         ("cy", cy)):
            out[key].append(np.stack(val))
    return {key: np.stack(val) if val else np.zeros((0, n, d)) for key, val in out.items()}


def ppdc(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float, gamma: float,
         omega: float, alpha_x: float, compress: Compress, iterations: int,
         scale_x: ScaleFn | None = None, scale_v: ScaleFn | None = None,
         seed: int = 0) -> dict[str, np.ndarray]:
    """PPDC, paper 000 Algorithm 2, per agent i (holder i keeps copies ``x^c[i][j]``), with
    ``sum_j L_ij h_j = sum_{j in N_i} w_ij (h_i - h_j)`` (L = D - W):

    agent j broadcasts ``cx_j = C(x_j + xi_{x_j} - x^c_j)``
    holder i: ``x_hat_j = x^c[i][j] + cx_j``                                                 (14)
    ``x_i <- x_i + xi_{x_i} - eta (gamma sum_j L_ij x_hat_j + omega v_i + grad f_i(x_i))``    (31)
    ``v_i <- v_i + xi_{v_i} + eta omega sum_j L_ij x_hat_j``                                  (32)
    ``x^c[i][j] <- (1-alpha_x) x^c[i][j] + alpha_x x_hat_j``                                  (16)

    ``x^c = 0``, ``v = 0`` initially; noise purposes ``"noise_x"``/``"noise_v"``, message name
    ``"x"``. Returns ``x``, ``v`` (``(K+1, n, d)``), ``xi_x``, ``xi_v`` and ``cx``
    (``(K, n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = _neighbours_only(W)
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    v = [np.zeros(d) for _ in range(n)]
    xc = [{j: np.zeros(d) for j in [i, *nb[i]]} for i in range(n)]
    out: dict[str, list] = {"x": [np.stack(x)], "v": [np.stack(v)], "xi_x": [], "xi_v": [],
                            "cx": []}
    for k in range(iterations):
        xi_x = _noise_vectors(rng, "noise_x", k, n, d, scale_x)
        xi_v = _noise_vectors(rng, "noise_v", k, n, d, scale_v)
        cx = [compress(x[j] + xi_x[j] - xc[j][j], j, k, "x") for j in range(n)]
        x_new, v_new = [], []
        for i in range(n):
            xh = {j: xc[i][j] + cx[j] for j in xc[i]}                                 # (14)
            lx = np.zeros(d)
            for j in nb[i]:
                lx = lx + W[i, j] * (xh[i] - xh[j])
            x_new.append(x[i] + xi_x[i]
                         - eta * (gamma * lx + omega * v[i] + grads[i](x[i], k)))      # (31)
            v_new.append(v[i] + xi_v[i] + eta * omega * lx)                           # (32)
            for j in xc[i]:
                xc[i][j] = (1 - alpha_x) * xc[i][j] + alpha_x * xh[j]                 # (16)
        x, v = x_new, v_new
        for key, val in (("x", x), ("v", v), ("xi_x", xi_x), ("xi_v", xi_v), ("cx", cx)):
            out[key].append(np.stack(val))
    return {key: np.stack(val) if val else np.zeros((0, n, d)) for key, val in out.items()}


def primal_dual(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, eta: float, gamma: float,
                omega: float, iterations: int, scale_x: ScaleFn | None = None,
                scale_v: ScaleFn | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The uncompressed primal-dual method of paper 000: (27)-(28) of Yi et al. without noise,
    (29)-(30) with it (``xi`` under purposes ``"noise_x"``/``"noise_v"``):

    ``x_i <- x_i + xi_{x_i} - eta (gamma sum_j L_ij (x_j + xi_{x_j}) + omega v_i +
    grad f_i(x_i))``                                                                     (27)/(29)
    ``v_i <- v_i + xi_{v_i} + eta omega sum_j L_ij (x_j + xi_{x_j})``                    (28)/(30)

    ``v = 0`` initially. Returns ``x``, ``v`` (``(K+1, n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = _neighbours_only(W)
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    v = [np.zeros(d) for _ in range(n)]
    xs, vs = [np.stack(x)], [np.stack(v)]
    for k in range(iterations):
        xi_x = _noise_vectors(rng, "noise_x", k, n, d, scale_x)
        xi_v = _noise_vectors(rng, "noise_v", k, n, d, scale_v)
        xa = [x[i] + xi_x[i] for i in range(n)]
        lx = [sum((W[i, j] * (xa[i] - xa[j]) for j in nb[i]), np.zeros(d)) for i in range(n)]
        x_new = [xa[i] - eta * (gamma * lx[i] + omega * v[i] + grads[i](x[i], k))
                 for i in range(n)]
        v = [v[i] + xi_v[i] + eta * omega * lx[i] for i in range(n)]
        x = x_new
        xs.append(np.stack(x))
        vs.append(np.stack(v))
    return {"x": np.stack(xs), "v": np.stack(vs)}


# ---- paper 002 (Chen & Wang): online data, Algorithm 1 and its baselines -------------------------

def online_rows(seed: int, purpose: str, t: int, agent: int, pool: np.ndarray,
                batch: int) -> np.ndarray:
    """Dataset rows agent ``agent`` acquires at iteration t: ``batch`` i.i.d. uniform positions
    in its pool, ``min(floor(u P), P - 1)`` with ``u`` from its own stream (as
    :class:`~dpnet.problems.online.OnlineProblem`)."""
    u = Streams(seed).uniform(purpose, t, [agent], batch)[0]
    P = len(pool)
    return np.array([pool[min(int(x * P), P - 1)] for x in u])


def online_gradient(sample_grad: Callable[[np.ndarray, int], np.ndarray], pool: np.ndarray,
                    batch: int, agent: int, seed: int = 0, purpose: str = "sample",
                    window: int | None = None) -> Grad:
    """Agent ``agent``'s online gradient ``grad f_t^i(x) = (1/(t+1)) sum_{k<=t} grad l(x, xi_k)``
    (paper 002, line 4 of Algorithm 1), literally: it stores every acquired row and averages the
    per-sample gradients ``sample_grad(x, row)`` over all of them (over the last ``window``
    batches when given)."""
    stored: list[np.ndarray] = []

    def grad(x: np.ndarray, t: int) -> np.ndarray:
        while len(stored) <= t:
            stored.append(online_rows(seed, purpose, len(stored), agent, pool, batch))
        batches = stored[: t + 1] if window is None else stored[max(0, t + 1 - window): t + 1]
        rows = [r for b in batches for r in b]
        return sum((sample_grad(x, r) for r in rows), np.zeros_like(x)) / len(rows)

    return grad


def logistic_sample_grad(A: np.ndarray, b: np.ndarray, reg: float) -> Callable:
    """``grad l(x, row r)`` of ``log(1 + exp(-b_r a_r^T x)) + reg/2 ||x||^2``, b in {-1, +1}."""
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return lambda x, r: -b[r] * _sigmoid(-b[r] * (A[r] @ x)) * A[r] + reg * x


def ldp_online(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, lambda0: float, v: float,
               sigma0: float | Sequence[float], varsigma: float | Sequence[float],
               iterations: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Algorithm 1 of paper 002, per agent i, with W Laplacian-like (``w_ii = -sum_j w_ij``):

    ``y_t^j = theta_t^j + vartheta_t^j``, ``vartheta`` ~ Lap(sigma0_j/(sqrt(2) (t+1)^varsigma_j))
    coordinates under purpose ``"noise"``;
    ``theta_{t+1}^i = theta_t^i + sum_{j in N_i} w_ij (y_t^j - theta_t^i) - lambda_t
    grad f_t^i(theta_t^i)``, ``lambda_t = lambda0/(t+1)^v``; ``grads[i](x, t)`` is agent i's
    all-data gradient at iteration t. Returns ``x`` (``(K+1, n, d)``) and the sent ``y`` and
    noise ``noise`` (``(K, n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = _neighbours_only(W)
    s0 = np.broadcast_to(np.atleast_1d(np.asarray(sigma0, dtype=np.float64)), (n,))
    vs = np.broadcast_to(np.atleast_1d(np.asarray(varsigma, dtype=np.float64)), (n,))
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    xs, ys, noises = [np.stack(x)], [], []
    for t in range(iterations):
        nu = [s0[i] / (np.sqrt(2.0) * (t + 1.0) ** vs[i]) for i in range(n)]
        noise = [agent_noise(rng, "noise", t, i, d, nu[i]) for i in range(n)]
        y = [x[i] + noise[i] for i in range(n)]                                  # line 7
        lam = lambda0 / (t + 1.0) ** v
        new = []
        for i in range(n):
            acc = np.array(x[i])
            for j in nb[i]:
                acc = acc + W[i, j] * (y[j] - x[i])
            new.append(acc - lam * grads[i](x[i], t))                           # line 6
        x = new
        xs.append(np.stack(x))
        ys.append(np.stack(y))
        noises.append(np.stack(noise))
    return {"x": np.stack(xs), "y": np.stack(ys), "noise": np.stack(noises)}


def ldol(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, lambda0: float, v: float,
         gamma0: float, u: float, sigma0: float | Sequence[float],
         varsigma: float | Sequence[float], iterations: int, radius: float | None = None,
         seed: int = 0) -> np.ndarray:
    """LDOL, paper 002's (17), per agent: ``theta_{t+1}^i = Pi[theta_t^i + gamma_t sum_{j in
    N_i} w_ij (theta_t^j + vartheta_t^j - theta_t^i) - lambda_t grad f_t^i(theta_t^i)]`` with
    ``vartheta`` ~ Lap(sigma0_j (t+1)^varsigma_j / sqrt(2)) coordinates (``"noise"``), Pi the
    clip to ``[-radius, radius]``. Returns the trajectory ``(K+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = _neighbours_only(W)
    s0 = np.broadcast_to(np.atleast_1d(np.asarray(sigma0, dtype=np.float64)), (n,))
    vs = np.broadcast_to(np.atleast_1d(np.asarray(varsigma, dtype=np.float64)), (n,))
    rng = Streams(seed)

    def proj(z):
        return z if radius is None else np.clip(z, -radius, radius)

    x = [proj(np.array(x0[i], dtype=np.float64)) for i in range(n)]
    xs = [np.stack(x)]
    for t in range(iterations):
        noise = [agent_noise(rng, "noise", t, i, d, s0[i] * (t + 1.0) ** vs[i] / np.sqrt(2.0))
                 for i in range(n)]
        gam, lam = gamma0 / (t + 1.0) ** u, lambda0 / (t + 1.0) ** v
        new = []
        for i in range(n):
            cons = np.zeros(d)
            for j in nb[i]:
                cons = cons + W[i, j] * (x[j] + noise[j] - x[i])
            new.append(proj(x[i] + gam * cons - lam * grads[i](x[i], t)))
        x = new
        xs.append(np.stack(x))
    return np.stack(xs)


def dola(A: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, alpha0: float, power: float,
         noise_scale: float, iterations: int, radius: float | None = None, seed: int = 0,
         at: str = "mixed") -> np.ndarray:
    """DOLA (Li et al. 2018, Algorithm 1; ``at="mixed"``) and DMOD with the Euclidean mirror map
    (``at="own"``), per agent: ``b_t^i = sum_j a_ij (w_t^j + sigma_t^j)`` (own broadcast
    included), ``w_{t+1}^i = Pi[b_t^i - alpha_{t+1} grad f_t^i(p)]`` with ``p = b_t^i`` (DOLA)
    or ``w_t^i`` (DMOD), ``alpha_k = alpha0/k^p`` and ``sigma_t`` ~ Lap(noise_scale
    max(t, 1)^-p) coordinates (``"noise"``). Returns the trajectory ``(K+1, n, d)``."""
    A = np.asarray(A, dtype=np.float64)
    n, d = A.shape[0], np.asarray(x0).shape[1]
    nbrs = in_neighbours(A)
    rng = Streams(seed)

    def proj(z):
        return z if radius is None else np.clip(z, -radius, radius)

    w = [proj(np.array(x0[i], dtype=np.float64)) for i in range(n)]
    ws = [np.stack(w)]
    for t in range(iterations):
        mu = noise_scale * max(t, 1) ** (-power)
        sent = [w[i] + agent_noise(rng, "noise", t, i, d, mu) for i in range(n)]
        alpha = alpha0 / (t + 1.0) ** power
        new = []
        for i in range(n):
            b = _weighted_sum(A, nbrs[i], i, sent)
            point = b if at == "mixed" else w[i]
            new.append(proj(b - alpha * grads[i](point, t)))
        w = new
        ws.append(np.stack(w))
    return np.stack(ws)


# ---- paper 001 (Huo et al.): DO-ADP and its baselines ---------------------------------------

def clip_vector(g: np.ndarray, bound: float, kind: str = "coordinate") -> np.ndarray:
    """Per-sample clipping: every coordinate into ``[-G/sqrt(d), G/sqrt(d)]`` ("coordinate",
    Assumption 2 of paper 001) or the l2 norm to at most G ("l2")."""
    if kind == "coordinate":
        c = bound / np.sqrt(g.size)
        return np.minimum(np.maximum(g, -c), c)
    norm = float(np.sqrt(np.sum(g * g)))
    return g if norm <= bound else g * (bound / norm)


def clipped_logistic_grad(A: np.ndarray, b: np.ndarray, reg: float, agent: int, batch_size: int,
                          bound: float | None, kind: str = "coordinate", seed: int = 0,
                          purpose: str = "sample", poisson: bool = False) -> Grad:
    """Agent ``agent``'s minibatch gradient of ``l(x, (a, b)) = log(1 + exp(-b a^T x)) +
    reg/2 ||x||^2``: each drawn sample's gradient ``-b a / (1 + exp(b a^T x)) + reg x`` clipped
    (``bound=None``: not clipped), then averaged. ``poisson``: record j is drawn when its uniform
    ``Streams(seed).uniform(purpose, k, [agent], m)[0, j] < batch_size / m``, and the sum is
    divided by ``batch_size`` (the expected batch), not by the number drawn."""
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = Streams(seed)

    def grad(x: np.ndarray, k: int = 0) -> np.ndarray:
        if poisson:
            u = rng.uniform(purpose, k, [agent], len(b))[0]
            idx, norm = np.flatnonzero(u < batch_size / len(b)), batch_size
        else:
            idx = minibatch(rng, purpose, k, agent, len(b), batch_size)
            norm = len(idx)
        out = np.zeros_like(x)
        for j in idx:
            g = -b[j] * A[j] * _sigmoid(-b[j] * (A[j] @ x)) + reg * x
            out = out + (g if bound is None else clip_vector(g, bound, kind))
        return out / norm

    return grad


def _topk(v: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros_like(v)
    idx = np.argsort(-np.abs(v), kind="stable")[:k]
    out[idx] = v[idx]
    return out


def doadp(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, alpha: float, gamma: float,
          beta: float, sigma: float, p: float, k: int, iterations: int,
          seed: int = 0) -> dict[str, np.ndarray]:
    """DO-ADP, paper 001 Algorithm 1 / eq. (5), per agent i (each holder i keeps its own copies
    ``x_hat[i][j]`` of every j in ``N_i + {i}``, all zero at start; ``m_i = 0``):

    ``eta_i ~ Bern(p)`` (``Streams(seed).bernoulli("activation", t, [i], p)``)
    active: ``m_i <- g_i(x_i, t) + theta_i + beta m_i`` with ``theta_i = sigma *
    gaussian("noise", t, [i], d)``, ``x_i <- x_i - alpha m_i + gamma sum_{j in N_i} w_ij
    (x_hat[i][j] - x_hat[i][i])``, ``s_i = Top_k(x_i^+ - x_hat[i][i])`` is sent
    inactive: ``m_i <- beta m_i``, ``x_i <- x_i + gamma sum_{j in N_i} w_ij (x_hat[i][j] -
    x_hat[i][i])``, nothing is sent
    every holder i of j's copy: ``x_hat[i][j] += s_j`` for active j.

    Returns ``x``, ``m`` (``(T+1, n, d)``), ``active`` (``(T, n)``) and ``s`` (``(T, n, d)``,
    zero rows for silent agents)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = [[j for j in row if j != i] for i, row in enumerate(in_neighbours(W))]
    rng = Streams(seed)
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    m = [np.zeros(d) for _ in range(n)]
    hat = [{j: np.zeros(d) for j in [i, *nb[i]]} for i in range(n)]
    out: dict[str, list] = {"x": [np.stack(x)], "m": [np.stack(m)], "active": [], "s": []}
    for t in range(iterations):
        eta = [bool(rng.bernoulli("activation", t, [i], p)[0]) for i in range(n)]
        x_new, m_new, s = [], [], []
        for i in range(n):
            cons = np.zeros(d)
            for j in nb[i]:
                cons = cons + W[i, j] * (hat[i][j] - hat[i][i])
            if eta[i]:
                theta = agent_noise(rng, "noise", t, i, d, sigma, "gaussian")
                m_new.append(grads[i](x[i], t) + theta + beta * m[i])             # (5a)
                x_new.append(x[i] - alpha * m_new[i] + gamma * cons)              # (5b)
                s.append(_topk(x_new[i] - hat[i][i], k))                          # (5c)
            else:
                m_new.append(beta * m[i])
                x_new.append(x[i] + gamma * cons)
                s.append(np.zeros(d))
        for i in range(n):
            for j in hat[i]:
                if eta[j]:
                    hat[i][j] = hat[i][j] + s[j]                                  # (5d)
        x, m = x_new, m_new
        out["x"].append(np.stack(x))
        out["m"].append(np.stack(m))
        out["active"].append(np.array(eta))
        out["s"].append(np.stack(s))
    return {key: np.stack(val) if val else np.zeros((0, n, d)) for key, val in out.items()}


def momentum_dsgd(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, alpha: float,
                  gamma: float, beta: float, iterations: int, m0: np.ndarray | None = None,
                  t0: int = 0) -> np.ndarray:
    """Decentralized momentum SGD, paper 001 eq. (2), per agent: ``m_i <- g_i(x_i, t) + beta
    m_i``, ``x_i <- x_i - alpha m_i + gamma sum_{j in N_i} w_ij (x_j - x_i)``, for t = t0 ..
    t0 + iterations - 1 from ``(x0, m0)``. Returns ``(iterations+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nb = [[j for j in row if j != i] for i, row in enumerate(in_neighbours(W))]
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    m = [np.zeros(d) if m0 is None else np.array(m0[i], dtype=np.float64) for i in range(n)]
    xs = [np.stack(x)]
    for t in range(t0, t0 + iterations):
        m = [grads[i](x[i], t) + beta * m[i] for i in range(n)]
        x = [x[i] - alpha * m[i] + gamma * sum((W[i, j] * (x[j] - x[i]) for j in nb[i]),
                                               np.zeros(d)) for i in range(n)]
        xs.append(np.stack(x))
    return np.stack(xs)


def dpdo(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, c: float, p: float, q: float,
         M: float, iterations: int, radius: float | None = None, seed: int = 0) -> np.ndarray:
    """DPDO (Huang, Mitra & Vaidya 2015), per agent: broadcast ``y_i = x_i + Lap(M q^k)^d``
    (purpose ``"noise"``), ``v_i = sum_j w_ij y_j`` (own message included), ``x_i <- Pi[v_i -
    c p^k g_i(v_i, k)]`` with Pi the box ``[-radius, radius]^d``. Returns ``(K+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nbrs = in_neighbours(W)
    rng = Streams(seed)

    def proj(z):
        return z if radius is None else np.clip(z, -radius, radius)

    x = [proj(np.array(x0[i], dtype=np.float64)) for i in range(n)]
    xs = [np.stack(x)]
    for k in range(iterations):
        y = [x[i] + agent_noise(rng, "noise", k, i, d, M * q ** k) for i in range(n)]
        new = []
        for i in range(n):
            v = _weighted_sum(W, nbrs[i], i, y)
            new.append(proj(v - c * p ** k * grads[i](v, k)))
        x = new
        xs.append(np.stack(x))
    return np.stack(xs)


def dp_dda(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray, beta0: float, sigma: float,
           p: float, iterations: int, radius: float | None = None,
           seed: int = 0) -> dict[str, np.ndarray]:
    """DP-DDA (Liu, Johansson & Shi 2024) as implemented in :mod:`dpnet.algorithms.dpdda`, per
    node: ``eta_i ~ Bern(p)`` (``"activation"``); ``z_i <- sum_j w_ij z_j + eta_i (g_i(x_i, t) +
    sigma * gaussian("noise", t, [i], d))``; ``x_i <- Pi[-z_i / (beta0 sqrt(t + 2))]``; the
    output is the running mean of ``x_1 .. x_{t+1}``. Returns ``x`` and ``x_avg``
    (``(K+1, n, d)``)."""
    W = np.asarray(W, dtype=np.float64)
    n, d = W.shape[0], np.asarray(x0).shape[1]
    nbrs = in_neighbours(W)
    rng = Streams(seed)

    def proj(v):
        return v if radius is None else np.clip(v, -radius, radius)

    x = [proj(np.array(x0[i], dtype=np.float64)) for i in range(n)]
    z = [np.zeros(d) for _ in range(n)]
    avg = [xi.copy() for xi in x]
    xs, avgs = [np.stack(x)], [np.stack(avg)]
    for t in range(iterations):
        eta = [bool(rng.bernoulli("activation", t, [i], p)[0]) for i in range(n)]
        z_new = []
        for i in range(n):
            zi = _weighted_sum(W, nbrs[i], i, z)
            if eta[i]:
                zi = zi + grads[i](x[i], t) + agent_noise(rng, "noise", t, i, d, sigma, "gaussian")
            z_new.append(zi)
        z = z_new
        x = [proj(-z[i] / (beta0 * np.sqrt(t + 2.0))) for i in range(n)]
        avg = [x[i] if t == 0 else avg[i] + (x[i] - avg[i]) / (t + 1) for i in range(n)]
        xs.append(np.stack(x))
        avgs.append(np.stack(avg))
    return {"x": np.stack(xs), "x_avg": np.stack(avgs)}


# ---- baselines of paper 003's Figs. 5-6 --------------------------------------------------------

Message = Callable[[int, int, np.ndarray], np.ndarray]     # (agent i, iteration k, value) -> sent


def coupled_dsgd(W: np.ndarray, grads: Sequence[Grad], x0: np.ndarray,
                 coupling: Callable[[int], float], step: Callable[[int], float],
                 message: Message, iterations: int) -> np.ndarray:
    """DSGD with a coupling weight, per agent ([36] and [41] of paper 003):
    ``x_i' = x_i + c_k sum_{j != i} w_ij (psi_j - x_i) - lambda_k grads[i](x_i, k)`` with
    ``psi_j = message(j, k, x_j)`` (quantized and/or perturbed state). Returns ``(K+1, n, d)``."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    x = [np.array(x0[i], dtype=np.float64) for i in range(n)]
    traj = [np.stack(x)]
    for k in range(iterations):
        psi = [message(j, k, x[j]) for j in range(n)]
        new = []
        for i in range(n):
            pull = np.zeros_like(x[i])
            for j in range(n):
                if j != i and W[i, j] != 0.0:
                    pull += W[i, j] * (psi[j] - x[i])
            new.append(x[i] + coupling(k) * pull - step(k) * grads[i](x[i], k))
        x = new
        traj.append(np.stack(x))
    return np.stack(traj)


def server_sgd(p: Sequence[float], grads: Sequence[Grad], x0: np.ndarray,
               step: Callable[[int], float], message: Message, iterations: int) -> np.ndarray:
    """A server's SGD ([33], [37] of paper 003): ``x' = x - eta_k sum_i p_i message(i, k, g_i(x))``
    with one model x. Returns ``(K+1, d)``."""
    x = np.array(x0, dtype=np.float64)
    traj = [x.copy()]
    for k in range(iterations):
        agg = np.zeros_like(x)
        for i, g in enumerate(grads):
            agg += p[i] * message(i, k, g(x, k))
        x = x - step(k) * agg
        traj.append(x.copy())
    return np.stack(traj)


def dp_sgd(W: np.ndarray, A: np.ndarray, b: np.ndarray, reg: float, x0: np.ndarray, lr: float,
           z: float, C: float, iterations: int, seed: int = 0, rate: float | None = None,
           batch_size: int | None = None, pairs: list[tuple[int, int]] = (),
           z_pair: float = 0.0, sizes=None) -> np.ndarray:
    """Decentralized DP-SGD, one agent at a time: agent i's batch of its ``m_i`` records
    (``sizes[i]``, default all of ``A.shape[1]``; Poisson: record j when its uniform
    ``Streams(seed).uniform("sample", k, [i], m_i)[0, j] < rate``, normaliser rate * m_i;
    fixed: :func:`minibatch` over m_i, normaliser batch_size), each record's logistic gradient clipped to
    l2 norm C, summed, plus ``z C`` times agent i's Gaussian draw ``"noise"``, divided by the
    normaliser; half step ``x_i - lr g_i``; then ``x_i = sum_j W_ij half_j``.

    DECOR: for the e-th edge ``(i, j)`` of ``pairs`` (i < j), the secret ``z_pair C`` times the
    Gaussian draw ``"pair_noise"`` keyed by e is added to agent i's sum and subtracted from
    agent j's."""
    rng, n = Streams(seed), W.shape[0]
    x = [np.asarray(x0[i], dtype=np.float64).copy() for i in range(n)]
    for k in range(iterations):
        half = []
        for i in range(n):
            m = A.shape[1] if sizes is None else int(sizes[i])
            if rate is not None:
                chosen, norm = np.flatnonzero(rng.uniform("sample", k, [i], m)[0] < rate), rate * m
            else:
                chosen, norm = minibatch(rng, "sample", k, i, m, batch_size), batch_size
            total = np.zeros_like(x[i])
            for j in chosen:
                g = -b[i, j] * A[i, j] * _sigmoid(-b[i, j] * (A[i, j] @ x[i])) + reg * x[i]
                total = total + clip_vector(g, C, "l2")
            total = total + agent_noise(rng, "noise", k, i, len(x[i]), z * C, "gaussian")
            for e, (lo, hi) in enumerate(pairs):
                if i in (lo, hi):
                    secret = agent_noise(rng, "pair_noise", k, e, len(x[i]), z_pair * C,
                                         "gaussian")
                    total = total + (secret if i == lo else -secret)
            noisy = total / norm
            half.append(x[i] - lr * noisy)
        nbrs = in_neighbours(W)
        x = [_weighted_sum(W, nbrs[i], i, half) for i in range(n)]
    return np.stack(x)
