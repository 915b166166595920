"""DPP2 (Ou, Wang, Liu & Lu): proximal primal-dual with double privacy protection, Algorithm 1.

Per agent i, with ``w_i^k ~ Lap_d(u_{w,i} r_i^k)``, ``e_i^k ~ Lap_d(u_{e,i} r_i^k)`` and the
public sequence ``eta^k in (0, 1)``, from ``d_i^0 = q_i^0 = 0``:

    y_i^k     = x_i^k + (1 - eta^k) d_i^k + w_i^k                       (16), line 6: sent
    z_i^k     = grad f_i(x_i^k) + eta^k q_i^k + rho sum_j p_ij y_j^k + e_i^k   (17), line 7: sent
    x_i^{k+1} = x_i^k + w_i^k - alpha (z_i^k - e_i^k) + beta sum_j p_ij z_j^k   (18), line 8
    d_i^{k+1} = eta^k d_i^k + y_i^k,  q_i^{k+1} = eta^k q_i^k + rho sum_j p_ij y_j^k  (19)

(sums over j in N_i and i). First tier: y and z merge the primal iterate and the gradient with
the duals d, q; second tier: the Laplace noises. With q^0 = d^0 = 0 this equals (20)-(21):
``x^{k+1} = x^k + w^k - G(grad f(x^k) + q^k + rho L(x^k + w^k)) + beta L e^k``,
``q^{k+1} = q^k + rho L(x^k + w^k)``, ``G = alpha I - beta L``, ``L = P (x) I_d``: the x-trajectory
does not depend on eta^k, and ``q^k = rho P d^k``, ``sum_i q_i^k = 0``.

P: symmetric PSD, neighbour-sparse, null space = consensus. ``P="weighted"`` (default) is
``I - W`` for the graph's doubly stochastic W (eigenvalues in [0, 2)); ``"unweighted"`` the graph
Laplacian; or an explicit array. G must be positive definite: ``0 < beta < alpha/lambda_max(P)``.
Privacy: Theorem 3 (:mod:`dpnet.privacy.ou`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ParameterError, open_interval, positive, require
from ..noise import Laplace, Noise, none
from ..privacy import accountants, ou
from ..rng import Streams
from .base import Algorithm, Context, State, register

NoiseArg = Noise | float | Sequence[float] | None


def _noise(label: str, value: NoiseArg, r) -> Noise:
    if value is None or isinstance(value, Noise):
        require(r is None or value is None, "r", r, f"r only with a plain scale u for {label}")
        return none() if value is None else value
    if np.all(np.asarray(value, dtype=float) == 0):
        return none()
    require(r is not None, "r", None, f"a decay rate 0 < r < 1 when {label} is a plain scale u")
    return Laplace(value, decay=r)


@register
class DPP2(Algorithm):
    name = "dpp2"
    paper = "Ou, Wang, Liu & Lu, Algorithm 1, eqs. (16)-(21) (paper 004)"
    private = True

    def __init__(self, alpha: float, beta: float, rho: float,
                 eta: float | str | Sequence[float] | np.ndarray = "random", noise_w: NoiseArg = None,
                 noise_e: NoiseArg = None, P: str | np.ndarray = "weighted",
                 r: float | Sequence[float] | None = None) -> None:
        self.alpha, self.beta, self.rho = (positive(k, v) for k, v in
                                           (("alpha", alpha), ("beta", beta), ("rho", rho)))
        if r is not None:
            ra = np.atleast_1d(np.asarray(r, dtype=float))
            require(bool(np.all((ra > 0) & (ra < 1))), "r", r, "0 < r < 1 (noise decay rate)")
        self.r = r
        self.noise_w, self.noise_e = _noise("noise_w", noise_w, r), _noise("noise_e", noise_e, r)
        if isinstance(eta, str) and eta != "random":
            try:
                eta = float(eta)
            except ValueError:
                raise ParameterError("eta", eta, "'random', a number in (0, 1) or a sequence "
                                     "of them") from None
        if isinstance(eta, int | float):
            eta = open_interval("eta", eta, 0.0, 1.0)
        elif not isinstance(eta, str):
            eta = np.asarray(eta, dtype=float).reshape(-1)
            require(eta.size > 0 and bool(np.all((eta > 0) & (eta < 1))), "eta", eta.tolist(),
                    "every eta^k in (0, 1)")
        self.eta = eta
        if isinstance(P, str):
            require(P in ("weighted", "unweighted"), "P", P, "'weighted', 'unweighted' or an array")
        self.P = P

    def _matrix(self, graph) -> str:
        """Register/validate P on the graph, check G > 0, return the matrix's name."""
        require(not graph.directed, "graph", graph.name, "DPP2 needs an undirected graph")
        graph.require_connected()
        if isinstance(self.P, str) and self.P == "weighted":
            graph.require_doubly_stochastic("DPP2's default P = I - W")
            key = "L"
        elif isinstance(self.P, str):
            key = "unweighted_laplacian"
        else:
            key = "dpp2.P"
            graph.add_matrix(key, self.P)
        P = graph.matrix(key)
        ev = np.linalg.eigvalsh(0.5 * (P + P.T))
        tol = 1e-9 * max(1.0, float(np.abs(ev).max()))
        require(np.allclose(P, P.T, atol=1e-12) and ev[0] >= -tol and (ev.size < 2 or ev[1] > tol)
                and np.abs(P.sum(axis=1)).max() <= tol, "P", key,
                "symmetric, positive semidefinite, null space = span(1) (Assumption 3)")
        lmax = float(ev[-1])
        if lmax > 0 and not self.beta < self.alpha / lmax:
            raise ParameterError("beta", self.beta, f"0 < beta < alpha/lambda_max(P) = "
                                 f"{self.alpha:g}/{lmax:.6g} = {self.alpha / lmax:.6g}, so that "
                                 "G = alpha I - beta P is positive definite (15)")
        return key

    def check_graph(self, graph) -> None:
        self._matrix(graph)

    def eta_at(self, ctx: Context, k: int) -> float:
        """Public eta^k, the same for every agent ("random": one draw per k from the run's seed)."""
        return self._eta(ctx.rng, k)

    def _eta(self, rng: Streams, k: int) -> float:
        if isinstance(self.eta, str):
            return float(rng.uniform("eta", k, np.zeros(1, dtype=np.int64), 1)[0, 0])
        if isinstance(self.eta, float):
            return self.eta
        require(k < self.eta.size, "eta", f"sequence of length {self.eta.size}",
                f"an eta^k for every iteration (k = {k})")
        return float(self.eta[k])

    def init(self, ctx: Context, x0) -> State:
        self._key = self._matrix(ctx.net.graph)
        return {"x": x0, "d": x0.new_zeros(x0.shape), "q": x0.new_zeros(x0.shape)}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x, d, q, P, eta = state["x"], state["d"], state["q"], self._key, self.eta_at(ctx, k)
        if ctx.rng.kind == "secret":      # lattice releases (Context.perturb): w, e as added
            clean = x + (1.0 - eta) * d
            y = ctx.perturb(clean, self.noise_w, "noise_w", k)
            w = y - clean
        else:
            w = ctx.noise(self.noise_w, "noise_w", k)
            y = x + (1.0 - eta) * d + w                                          # line 6
        Py = ctx.net.mix(ctx.net.exchange(y, "y", matrix=P), P)
        clean = ctx.grad(x) + eta * q + self.rho * Py
        if ctx.rng.kind == "secret":
            z = ctx.perturb(clean, self.noise_e, "noise_e", k)
            e = z - clean
        else:
            e = ctx.noise(self.noise_e, "noise_e", k)
            z = clean + e                                                        # line 7
        Pz = ctx.net.mix(ctx.net.exchange(z, "z", matrix=P), P)
        return {"x": x + w - self.alpha * (z - e) + self.beta * Pz,              # line 8
                "d": eta * d + y, "q": eta * q + self.rho * Py}                  # lines 9-10

    # -- privacy: accountant "ou" (below) and the generic ones over mechanism() --------------
    default_accountant = "ou"
    # released: x^k + w^k = y^k - (1 - eta^k) d^k, the noisy model inside the last message y,
    # where d^k sums the agent's own sent y's (the state's x holds a clean gradient step)
    released = ("message", "y")

    def released_model(self, result) -> np.ndarray:
        y = super().released_model(result)                         # y^{K-1}
        eta = self._eta(Streams(result.seed), result.iterations - 1)
        d_before = (np.asarray(result.state["d"]) - y) / eta       # d^K = eta d^{K-1} + y^{K-1}
        return y - (1.0 - eta) * d_before
    noise_attributes = ("noise_w", "noise_e")

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..K: the e- and w-noised messages, Laplace, Theorem 3's sensitivities."""
        return ou.dpp2_mechanism(problem, graph, iterations, self.alpha, self.noise_w,
                                 self.noise_e, assumptions.adjacency_radius,
                                 assumptions.smoothness)

    def calibrated(self, problem, graph, target: float, iterations: int, adjacency: float,
                   over: str = "u", variant: str = "conservative",
                   smoothness: float | None = None) -> DPP2:
        """A copy whose noise meets ``target`` by Theorem 3: smallest common multiple of the
        scales u (``over="u"``) or smallest common decay r (``over="r"``); never overshoots."""
        w, e = ou.calibrate_noises(problem, graph, target, iterations, self.alpha, self.noise_w,
                                   self.noise_e, adjacency, over, variant, smoothness)
        return DPP2(self.alpha, self.beta, self.rho, self.eta, w, e, self.P)


@accountants.register(DPP2, "ou", pure=True)
def ou_accountant(alg, problem, graph, iterations, assumptions, variant: str = "conservative"):
    """Theorem 3 of paper 004 (adjacency_radius, the paper's delta, required; ``variant`` "conservative" sums
    k = 0..K, "printed" k = 1..K; the smoothness assumption overrides the problem's Mbar)."""
    return ou.dpp2_guarantee(alg.name, problem, graph, iterations, alg.alpha, alg.noise_w,
                             alg.noise_e, assumptions.adjacency_radius, variant,
                             assumptions.smoothness)
