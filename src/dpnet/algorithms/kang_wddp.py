"""Baseline [33] of paper 003: weighted distributed DP ERM (WD-DP) of Kang, Liu, Niu & Wang
(Computers & Security 2021), gradient perturbation with Gaussian noise:

    x_{k+1} = x_k - eta_k sum_i p_i (g_i(x_k) + z_{i,k}),    z_{i,k} ~ N(0, sigma^2 I_d),

with ``p_i = n_i / N`` the parties' data shares, ``eta_k = eta / (k+1)^power`` and ``g_i`` the
average gradient of m distinct local samples. [33] has a central server; here the server is
emulated on a complete graph whose weight matrix has identical rows p (:func:`server_graph`): every
agent broadcasts ``u_i = x_i - eta_k (g_i + z_i)`` and keeps ``sum_j p_j u_j``, so agents that
start from the same x_0 all hold the server's model. Privacy: accountant ``"kang"`` (the default),
:mod:`dpnet.privacy.kang` (RDP accounting of the same Gaussian mechanism, with the amplification of
sampling m of the D local samples without replacement; [33]'s closed form has an unspecified
constant), paper 003's C = 2G, G bounding every gradient, given as exactly one of
``gradient_bound`` (G bounds the l2 norm) or ``l1_gradient_bound`` (an l1 bound also bounds the l2
norm), epsilon at the assumption ``delta`` (given: none is assumed), option ``subsampled``.
:meth:`KangWDDP.mechanism` describes the Gaussian releases (the noisy gradient ``g_i + z_i``: l2
sensitivity ``C/m``, noise ``sigma``) without subsampling: the generic accountants know Poisson
subsampling only, not sampling without replacement under replace-one adjacency, so ``rdp``/``pld``
give the unamplified bound (``kang`` with ``subsampled=False``). ``calibrate`` scales ``sigma`` and
the noise it builds by one factor."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError, nonnegative, positive, positive_int, require
from ..graphs import Graph, from_weights
from ..noise import Gaussian
from ..privacy import accountants, kang
from ..privacy import chen_wang_zhang as cwz
from ..privacy.guarantee import PrivacyGuarantee
from ..privacy.mechanism import Mechanism, Releases
from ..problems.base import equal_local_size
from .base import Algorithm, Context, State, register


def server_graph(n: int, p: np.ndarray | None = None) -> Graph:
    """Complete graph with ``W = 1 p^T`` (default ``p = 1/n``): one mixing step is the server's
    weighted average."""
    n = positive_int("n", n)
    p = np.full(n, 1.0 / n) if p is None else np.asarray(p, dtype=np.float64)
    require(p.shape == (n,) and bool(np.all(p > 0)) and abs(p.sum() - 1) < 1e-12, "p", p,
            "positive weights summing to 1, one per agent")
    return from_weights(np.tile(p, (n, 1)), name=f"server({n})")


def require_server(graph, who: str) -> None:
    """Raise :class:`~dpnet.errors.ParameterError` (naming ``who``, suggesting :func:`server_graph`)
    unless the graph's W has identical, positive rows summing to 1 (to ``np.allclose``'s default
    tolerance): the weights of a server's weighted average."""
    W = graph.W
    if not (np.allclose(W, W[:1]) and np.allclose(W.sum(1), 1.0) and np.all(W > 0)):
        raise ParameterError("graph", graph.name, f"{who} aggregates at a server: W must have "
                             "identical positive rows summing to 1", "use server_graph(n, p)")


@register
class KangWDDP(Algorithm):
    name = "kang_wddp"
    paper = "Kang, Liu, Niu & Wang (2021), WD-DP gradient perturbation; [33] of paper 003"
    private = True
    identical_steps = True          # sigma and C/m are the same every step (eta_k is not privacy)

    def __init__(self, eta: float, sigma: float, batch: int, power: float = 0.0) -> None:
        self.eta, self.sigma = positive("eta", eta), nonnegative("sigma", sigma)
        self.batch, self.power = positive_int("batch", batch), nonnegative("power", power)
        self.noise = Gaussian(self.sigma)

    def check_graph(self, graph) -> None:
        require_server(graph, self.name)

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        g = ctx.grad(x, self.batch, k=k, purpose="sample")
        u = x - self.eta / (k + 1.0) ** self.power * ctx.perturb(g, self.noise, "noise", k)
        return {"x": ctx.net.mix(ctx.net.exchange(u, "u"), "W")}

    # -- privacy: accountant "kang" (below) and the generic ones over mechanism() ------------
    default_accountant = "kang"
    # released: the server's average of the noisy messages
    released = ("state", "x")
    noise_attributes = ("sigma", "noise")       # the scale and the noise it builds, together

    def _check(self, iterations, assumptions) -> float:
        """The l2 sensitivity constant C = 2G of one sampled gradient (see the module docstring)."""
        if iterations is None or iterations < 1:
            raise ParameterError("iterations", iterations, "a finite horizon (>= 1)")
        if self.sigma == 0:
            raise ParameterError("sigma", self.sigma, "sigma > 0 (no noise, no guarantee)")
        return cwz.definition3(assumptions, f"{self.name}'s accountant")[0]

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..iterations-1: every party's ``u_i = x - eta_k (g_i + z_i)``, i.e. (x being
        the public model) its noisy gradient ``g_i + z_i``: Gaussian, l2 sensitivity ``C/m``,
        noise ``sigma``; no subsampling amplification (see the module docstring)."""
        C = self._check(iterations, assumptions)
        return [(np.arange(graph.n), Mechanism(
            (Releases("g + z", "gaussian", C / self.batch, np.full(iterations, self.sigma)),),
            adjacency="record (paper 003's Definition 3: one sample of one party replaced)",
            horizon=iterations,
            source=f"Gaussian gradient perturbation, l2 sensitivity C/m with C = {C:g}, "
                   f"m = {self.batch}",
            notes=("sampling m of D without replacement is not credited (the generic "
                   "accountants know Poisson subsampling only)",), relation="replace_one"))]


@accountants.register(KangWDDP, "kang")
def kang_accountant(alg, problem, graph, iterations, assumptions,
                    subsampled: bool = True) -> PrivacyGuarantee:
    """RDP-accounted Gaussian releases (see :mod:`dpnet.privacy.kang`) at the assumption
    ``delta`` (given: none is assumed); C = 2G, G from exactly one of ``gradient_bound`` (l2) or
    ``l1_gradient_bound`` (bounds on every gradient); D = the problem's local sample count;
    ``subsampled``: credit the sampling of m of D without replacement (default)."""
    C = alg._check(iterations, assumptions)
    delta = accountants.required_delta(assumptions, "kang")
    D = equal_local_size(problem, "Kang et al.'s account (D local samples)")
    eps = kang.epsilon(alg.sigma, C, alg.batch, int(D), iterations, delta, subsampled)
    norm = "l2" if assumptions.gradient_bound is not None else "l1, so also l2"
    return PrivacyGuarantee.from_per_agent(
        [eps] * graph.n, delta=delta, horizon=iterations,
        theorem="Gaussian mechanism (sensitivity C/m) composed by the RDP accountant"
                + (" with sampling without replacement" if subsampled else ""),
        assumptions=(f"paper 003's Definition 3 with C = {C:g} ({norm})",),
        notes=("[33]'s own closed form has an unspecified constant c",))
