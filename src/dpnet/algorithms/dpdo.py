"""DPDO: differentially private distributed optimization (Huang, Mitra & Vaidya, ICDCN 2015), a
baseline of paper 001 (Fig. 3; also paper 002's PDOP).

Per agent i at iteration k, with a doubly stochastic A (``graph.W``, self-weight included),
``eta_{i,k} ~ Lap(M q^k)`` per coordinate and step ``gamma_k = c p^k`` (``0 < p < q < 1``):

    y_{i,k}   = x_{i,k} + eta_{i,k}                (broadcast: the only message, d floats)
    v_{i,k}   = sum_j a_ij y_{j,k}                 (received noisy states, own included)
    x_{i,k+1} = Pi_X[ v_{i,k} - gamma_k grad f_i(v_{i,k}) ]

Both the step and the noise decay geometrically, and the step faster than the noise, which makes
the privacy budget a convergent geometric series and the accuracy loss O(1/eps^2) (the
trade-off paper 001 criticises). X is the box ``[-radius, radius]^d`` (``radius=None``: R^d).

Privacy (pure epsilon-DP of agent i's objective, everything on the wire observed): with all
messages fixed, ``x_{i,k+1}`` of two adjacent objectives differs by at most ``gamma_k`` times the
gradient sensitivity ``Delta_g`` (l1; the box projection is coordinate-wise, hence l1
non-expansive), and it is carried by the message of iteration k+1 under ``Lap(M q^{k+1})``, so

    eps = sum_{k=0}^{K-1} c p^k Delta_g / (M q^{k+1}) <= Delta_g c / (M (q - p))   (K -> inf)

``Delta_g = 2 sqrt(d) G`` for objectives with ``||grad f_i|| <= G`` (the paper's adjacency:
any two objectives with bounded gradients), ``2 sqrt(d) G / m`` for one replaced record of m when
each per-sample gradient is clipped to l2 norm G and the full local gradient is used
(``adjacency="record"``, paper 001's notion), ``2 sqrt(d) G / B`` with B-sample stochastic
gradients (no subsampling amplification claimed).

In dpnet: accountant ``"huang"`` (the default; constants ``gradient_bound``, ``adjacency``;
``iterations=None`` gives the K -> inf limit), :meth:`DPDO.mechanism` for the generic accountants
(basic composition of its releases is exactly ``"huang"``), and calibration over M through
:meth:`~dpnet.algorithms.base.Algorithm.calibrate`.

Gaps (the original paper could not be consulted while writing this; implemented from its
published description and the structure of its analysis as recalled): the names c, p, q, M and
the own-noisy-message convention follow the common presentation of Huang et al.'s Algorithm 1; the
original's constant may differ from the derived one above by a factor q (whether the step of
iteration k is charged to the noise of iteration k or k+1); the constraint set is a box chosen
here; the gradient may be stochastic (``batch_size``) and clipped (``clip``: l2 clipping at G, matching
the l2 bound G above; ``coordinate_clip``: per coordinate at G/sqrt(d)), which the original does not do.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ..errors import ParameterError, nonnegative, positive, positive_int, require
from ..noise import Laplace
from ..privacy import accountants
from ..privacy.guarantee import PrivacyGuarantee
from ..privacy.mechanism import Mechanism, Releases
from ..problems.base import ProblemConstants, equal_local_size
from ..problems.stochastic import clip_argument, clipped_stochastic_grad
from .base import Algorithm, BoxConstrained, Context, State, register


@register
class DPDO(BoxConstrained, Algorithm):
    name = "dpdo"
    paper = "Huang, Mitra & Vaidya (ICDCN 2015), Algorithm 1"
    private = True

    def __init__(self, c: float, p: float, q: float, M: float = 0.0,
                 radius: float | None = None, batch_size: int | None = None,
                 clip: float | None = None, coordinate_clip: float | None = None) -> None:
        self.c = positive("c", c)
        self.p = positive("p", p)
        self.q = positive("q", q)
        require(self.p < self.q < 1, "q", q, f"p = {p} < q < 1 (the step decays faster than the "
                "noise)")
        self.M = nonnegative("M", M)
        self.radius = None if radius is None else positive("radius", radius)
        self.batch_size = None if batch_size is None else positive_int("batch_size", batch_size)
        self.clip = clip_argument(clip, coordinate_clip)
        self.noise = Laplace(self.M, decay=self.q)

    def check_graph(self, graph) -> None:
        graph.require_mixing(self.name)

    def step(self, ctx: Context, state: State, k: int) -> State:
        y = ctx.perturb(state["x"], self.noise, "noise", k)
        v = ctx.net.mix(ctx.net.exchange(y, "y"))
        if self.batch_size is None:
            g = ctx.grad(v)
        else:
            g = clipped_stochastic_grad(ctx.problem, v, ctx.rng, k, self.batch_size, ctx.agents,
                                        clip=self.clip)
        return {"x": self._project(v - self.c * self.p ** k * g)}

    # -- privacy: accountant "huang" (below) and the generic ones over mechanism() -----------
    default_accountant = "huang"
    # released: the state holds a clean gradient step: only the noisy messages are covered
    released = ("message", "y")
    noise_attributes = ("M", "noise")           # the accountant reads M, the steps noise

    def gradient_sensitivity(self, problem, gradient_bound: float | None,
                             adjacency: str) -> float:
        """l1 sensitivity ``Delta_g`` of the gradient a step uses (module docstring)."""
        G = gradient_bound
        if G is None and self.clip is not None and self.clip.kind == "l2":
            G = self.clip.bound
        if G is None:
            raise ParameterError("gradient_bound", None, "an l2 bound G on the (per-sample) "
                                 "gradients, or an l2 clip, for DPDO's sensitivity")
        require(adjacency in ("function", "record"), "adjacency", adjacency,
                "'function' or 'record'")
        base = 2.0 * math.sqrt(problem.dim) * G
        if adjacency == "function":
            return base
        if self.batch_size is not None:
            return base / self.batch_size
        return base / equal_local_size(problem, "DPDO's record sensitivity 2 sqrt(d) G / m")

    def epsilon(self, Delta_g: float, iterations: int | None) -> float:
        """Pure epsilon of agent i's objective after ``iterations`` = K steps, for gradient sensitivity
        ``Delta_g`` (l1): ``sum_{k=0}^{K-1} c p^k Delta_g / (M q^{k+1})``, the geometric series of the
        module docstring; ``iterations=None`` gives its K -> inf limit ``Delta_g c / (M (q - p))``, and
        ``M = 0`` (no noise) gives inf."""
        if self.M == 0:
            return math.inf
        r = self.p / self.q
        if iterations is None:
            terms = 1.0 / (1.0 - r)
        else:
            terms = -math.expm1(iterations * math.log(r)) / (1.0 - r)
        return Delta_g * self.c / (self.M * self.q) * terms

    def mechanism(self, problem, graph, iterations, assumptions):
        """Per k = 0..K-1: the message ``y_{k+1}`` carries ``x_{k+1}``, which two adjacent
        objectives move by at most ``c p^k Delta_g`` (l1), under ``Lap(M q^{k+1})``: basic
        composition of these releases is :func:`huang_accountant` (module docstring)."""
        adjacency = assumptions.adjacency or "function"
        D = self.gradient_sensitivity(problem, assumptions.gradient_bound, adjacency)
        k = np.arange(int(iterations), dtype=np.float64)
        release = Releases("y_{k+1} = x_{k+1} + Lap(M q^{k+1})", "laplace",
                           self.c * self.p ** k * D, self.M * self.q ** (k + 1))
        n = graph.n if graph is not None else problem.n_agents
        return [(np.arange(n), Mechanism((release,), adjacency, int(iterations),
                                         f"DPDO's l1 gradient sensitivity Delta_g = {D:.6g}",
                                         relation="replace_one"))]

    def calibrate(self, epsilon, problem, graph, iterations=None, over=None, accountant=None,
                  assumptions=None, **constants) -> DPDO:
        """:meth:`Algorithm.calibrate <dpnet.algorithms.base.Algorithm.calibrate>`; by the
        ``"huang"`` account over M, epsilon is exactly proportional to 1/M, so the search's answer
        is then finished in closed form (and re-checked: never above ``epsilon``)."""
        out = super().calibrate(epsilon, problem, graph, iterations, over, accountant,
                                assumptions, **constants)
        if (accountant or self.default_accountant) != "huang" or over is not None:
            return out

        def eps(alg: DPDO) -> float:
            return alg.privacy(problem, graph, iterations, assumptions=assumptions,
                               accountant=accountant, **constants).epsilon

        exact, M = copy.copy(out), out.M * eps(out) / epsilon
        for _ in range(4):                  # a rounding above the target: the next float up
            exact.M, exact.noise = M, Laplace(M, decay=self.q)
            if eps(exact) <= epsilon:
                return exact
            M = math.nextafter(M, math.inf)
        return out

    @classmethod
    def for_chen_wang(cls, c: float | None, epsilon: float, gradient_bound: float, dim: int,
                      radius: float | None, iterations: int | None = None, p: float = 0.999,
                      q: float = 0.9995) -> DPDO:
        """Paper 002's PDOP: step ``c p^k`` (``c=None``: 1), noise calibrated (by
        :meth:`~dpnet.algorithms.base.Algorithm.calibrate` over M and the ``"huang"``
        accountant) to ``epsilon`` for the function adjacency with l2 gradient bound G in
        dimension ``dim``."""
        alg = cls(1.0 if c is None else c, p, q, 1.0, radius)
        return alg.calibrate(epsilon, ProblemConstants(1, dim), None, iterations,
                             gradient_bound=gradient_bound, adjacency="function")


@accountants.register(DPDO, "huang", pure=True)
def huang_accountant(alg, problem, graph, iterations, assumptions):
    """Laplace composition over DPDO's messages (Huang, Mitra & Vaidya 2015; derived in dpdo.py):
    gradient_bound G (or an l2 clip), adjacency "function" (default) or "record";
    iterations=None: the K -> inf limit."""
    if alg.M == 0:
        return PrivacyGuarantee.none("DPDO with M = 0 adds no noise", iterations)
    adjacency = assumptions.adjacency or "function"
    D = alg.gradient_sensitivity(problem, assumptions.gradient_bound, adjacency)
    eps = alg.epsilon(D, iterations)
    n = graph.n if graph is not None else problem.n_agents
    return PrivacyGuarantee.from_per_agent(
        [eps] * n, horizon=iterations,
        theorem="Laplace composition over DPDO's messages (Huang, Mitra & Vaidya 2015; "
                "derived for this implementation, see the module docstring)",
        assumptions=(f"l1 gradient sensitivity Delta_g = {D:.6g} ({adjacency} adjacency)",
                     f"c = {alg.c:g}, p = {alg.p:g}, q = {alg.q:g}, M = {alg.M:g}"))
