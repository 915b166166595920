"""Schemes S1 and S2 of Chen, Wang & Zhang (paper 003), Lemma 2's matrix A, Assumptions 5 and 6.

* **S1** (given K): ``alpha = a1/K^p_alpha``, ``beta = a2/K^p_beta``, ``gamma = a3/K^p_gamma``,
  ``m = floor(a4 K^p_m) + 1``, noise ``sigma^zeta_k = (k+1)^p_zeta``, ``sigma^eta_k = (k+1)^p_eta``
  (no scale factor; the exponents may be negative, zero or positive).
* **S2** (given K): constant ``alpha, beta, gamma``, ``m = floor(p_m^K) + 1``, noise
  ``sigma^zeta_k = p_zeta^K``, ``sigma^eta_k = p_eta^K``: constant in k and set by K (not a typo
  for p^k: Theorem 4's proof relies on it).

Algorithm 1 loops k = 0..K, so a scheme sized for K runs K+1 iterations
(:attr:`Scheme.iterations`) and its messages at k = 0..K are what Lemma 5 sums over.

Lemma 2's matrix A is evaluated with ``rho_X`` read as the spectral norm (largest singular value)
by default: the proof bounds ``||X z|| <= rho_X ||z||``, which the spectral radius does not give
for the non-normal W1, W2, L1, L2 of a digraph (W1 is a projection, whose spectral radius is 1
whatever its norm). ``rho="radius"`` evaluates A with spectral radii, as the notation says.

``A13`` is taken from its derivation, Appendix B (28): ``8 (1 + r1 alpha) gamma^2 rho_W1^2
||v2||^2 L / (r1 alpha)``. Lemma 2's statement prints ``gamma`` instead of ``gamma^2``; with the
printed entry, ``A13 A31 ~ gamma^2/alpha`` outgrows ``(1 - A11)(1 - A33) ~ alpha gamma`` under
Lemma 3's step sizes and rho_A < 1 fails for every K1 (checked numerically), so the statement's
entry is a typo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import positive, positive_int, require
from ..noise import Laplace
from ..privacy import chen_wang_zhang as cwz
from ..privacy.chen_wang_zhang import Condition


@dataclass(frozen=True)
class Scheme:
    """Step sizes, sampling number and noise of one scheme for one K (see module docstring)."""

    name: str
    K: int
    alpha: float
    beta: float
    gamma: float
    m: int
    p_zeta: float
    p_eta: float
    params: dict[str, float] = field(default_factory=dict)

    @property
    def iterations(self) -> int:
        """K + 1: Algorithm 1 runs k = 0..K."""
        return self.K + 1

    def sigma(self, k: int) -> tuple[float, float]:
        """``(sigma^zeta_k, sigma^eta_k)``."""
        if self.name == "S1":
            return (k + 1.0) ** self.p_zeta, (k + 1.0) ** self.p_eta
        return self.p_zeta ** self.K, self.p_eta ** self.K

    def noises(self) -> tuple[Laplace, Laplace]:
        """The Laplace noises ``(zeta, eta)`` of Algorithm 1, whose scales at iteration k are those of
        :meth:`sigma`: ``(k+1)^p_zeta`` and ``(k+1)^p_eta`` for S1, the constants ``p_zeta^K`` and
        ``p_eta^K`` for S2."""
        if self.name == "S1":   # Laplace(scale, power=c) draws Lap(scale / (k+1)^c)
            return Laplace(1.0, power=-self.p_zeta), Laplace(1.0, power=-self.p_eta)
        return Laplace(self.p_zeta ** self.K), Laplace(self.p_eta ** self.K)

    def cumulative_epsilon(self, graph, C: float, d: int, form: str = "compact",
                           norm: str = "l2") -> np.ndarray:
        """``(K+1, n)``: Lemma 5's partial sums for every protected agent."""
        return cwz.cumulative_epsilon(graph, self.alpha, self.beta, self.gamma, self.m, C, d,
                                      lambda k: self.sigma(k)[0], lambda k: self.sigma(k)[1],
                                      self.K, form, norm)

    def conditions(self, graph=None, L: float | None = None, mu: float | None = None,
                   rho: str = "norm") -> list[Condition]:
        """Assumption 5 (S1) or 6 (S2), and Theorem 3 (S1) or 4 (S2) when a graph is given."""
        if self.name == "S1":
            out = assumption5(self, L)
            if graph is not None:
                p = self.params
                out += cwz.theorem3_conditions(graph, p["a1"], p["a2"], self.K, p["p_alpha"],
                                               p["p_beta"], p["p_gamma"], p["p_m"],
                                               self.p_zeta, self.p_eta)
            return out
        out = assumption6(self, graph, L, mu, rho)
        if graph is not None:
            out += cwz.theorem4_conditions(graph, self.alpha, self.beta, self.params["p_m"],
                                           self.p_zeta, self.p_eta)
        return out

    def describe(self) -> dict[str, Any]:
        """The scheme as a flat dict for reports: name, K, ``alpha``, ``beta``, ``gamma``, ``m``, the
        noise scales at k = 0 and k = K (``sigma_zeta_0``, ``sigma_zeta_K``, ``sigma_eta_0``,
        ``sigma_eta_K``) and the scheme's own parameters (``a1..a4`` and the exponents for S1, ``p_m`` for
        S2)."""
        s0, sK = self.sigma(0), self.sigma(self.K)
        return {"scheme": self.name, "K": self.K, "alpha": self.alpha, "beta": self.beta,
                "gamma": self.gamma, "m": self.m, "sigma_zeta_0": s0[0], "sigma_zeta_K": sK[0],
                "sigma_eta_0": s0[1], "sigma_eta_K": sK[1], **self.params}


def scheme_s1(K: int, a1: float, a2: float, a3: float, a4: float, p_alpha: float, p_beta: float,
              p_gamma: float, p_m: float, p_zeta: float, p_eta: float) -> Scheme:
    """Scheme (S1): ``a1..a4 > 0``, ``p_alpha, p_beta, p_gamma > 0``, ``p_m >= 0``."""
    K = positive_int("K", K)
    for nm, v in (("a1", a1), ("a2", a2), ("a3", a3), ("a4", a4), ("p_alpha", p_alpha),
                  ("p_beta", p_beta), ("p_gamma", p_gamma)):
        positive(nm, v)
    require(p_m >= 0, "p_m", p_m, "p_m >= 0 (Scheme S1)")
    for nm, v in (("p_zeta", p_zeta), ("p_eta", p_eta)):
        require(math.isfinite(v), nm, v, "a finite exponent")
    m = math.floor(a4 * K ** p_m) + 1
    params = dict(a1=a1, a2=a2, a3=a3, a4=a4, p_alpha=p_alpha, p_beta=p_beta, p_gamma=p_gamma,
                  p_m=p_m)
    return Scheme("S1", K, a1 / K ** p_alpha, a2 / K ** p_beta, a3 / K ** p_gamma, m,
                  float(p_zeta), float(p_eta), params)


def scheme_s2(K: int, alpha: float, beta: float, gamma: float, p_m: float, p_zeta: float,
              p_eta: float) -> Scheme:
    """Scheme (S2): constant ``alpha, beta, gamma > 0``, ``m = floor(p_m^K) + 1``, noise
    ``p_zeta^K``, ``p_eta^K`` (``p_zeta, p_eta > 0``; Assumption 6 also wants them < 1)."""
    K = positive_int("K", K)
    for nm, v in (("alpha", alpha), ("beta", beta), ("gamma", gamma), ("p_zeta", p_zeta),
                  ("p_eta", p_eta)):
        positive(nm, v)
    require(p_m >= 0, "p_m", p_m, "p_m >= 0 (Scheme S2)")
    m = math.floor(p_m ** K) + 1
    return Scheme("S2", K, float(alpha), float(beta), float(gamma), m, float(p_zeta),
                  float(p_eta), {"p_m": p_m})


def theorem1_exponent(p_alpha: float, p_beta: float, p_gamma: float, p_m: float, p_zeta: float,
                      p_eta: float) -> float:
    """Theorem 1's rate exponent ``theta - max(p_alpha, p_beta, p_gamma)``."""
    theta = min(p_m, 2 * p_alpha - 2 * p_zeta - p_beta, 2 * p_beta - 2 * p_eta,
                2 * p_gamma - p_beta)
    return theta - max(p_alpha, p_beta, p_gamma)


def assumption5(s: Scheme, L: float | None = None) -> list[Condition]:
    """Assumption 5 for an S1 scheme (``3 a3 L < K^p_gamma`` needs the smoothness L)."""
    require(s.name == "S1", "scheme", s.name, "Assumption 5 is about Scheme S1")
    p = s.params
    out = []
    if L is not None:
        gap = s.K ** p["p_gamma"] - 3 * p["a3"] * L
        out.append(Condition("K^p_gamma - 3 a3 L", gap, gap > 0, "Assumption 5"))
    for label, v in (("2p_alpha - 2p_zeta - p_beta", 2 * p["p_alpha"] - 2 * s.p_zeta - p["p_beta"]),
                     ("p_beta - p_eta", p["p_beta"] - s.p_eta),
                     ("2p_gamma - p_alpha", 2 * p["p_gamma"] - p["p_alpha"]),
                     ("2p_gamma - p_beta", 2 * p["p_gamma"] - p["p_beta"])):
        out.append(Condition(label, v, v > 0, "Assumption 5"))
    e = theorem1_exponent(p["p_alpha"], p["p_beta"], p["p_gamma"], p["p_m"], s.p_zeta, s.p_eta)
    out.append(Condition("Theorem 1 rate exponent theta - max(p_alpha, p_beta, p_gamma)", e,
                         e > 0, "Theorem 1 (a positive exponent means a guaranteed decrease)"))
    return out


def _rho(X: np.ndarray, kind: str) -> float:
    if kind == "norm":
        return float(np.linalg.norm(X, 2))
    return float(np.max(np.abs(np.linalg.eigvals(X))))


def lemma2_matrix(graph, alpha: float, beta: float, gamma: float, L: float, mu: float,
                  rho: str = "norm") -> np.ndarray:
    """Lemma 2's 3x3 matrix A (catalogue 4.A, with A13 from (28)), ``rho`` as in the module
    docstring."""
    require(rho in ("norm", "radius"), "rho", rho, "'norm' (spectral norm) or 'radius'")
    positive("L", L)
    positive("mu", mu)
    n = graph.n
    one, v1, v2 = np.ones(n), graph.v1, graph.v2
    r1, r2 = graph.rates(alpha, beta)
    W1 = np.eye(n) - np.outer(one, v1) / n
    W2 = np.eye(n) - np.outer(v2, one) / n
    pW1, pW2 = _rho(W1, rho), _rho(W2, rho)
    pL1 = _rho(graph.in_laplacian, rho)
    nv1, nv2 = float(v1 @ v1), float(v2 @ v2)        # ||v1||^2, ||v2||^2
    a, b, g = alpha, beta, gamma
    A = np.empty((3, 3))
    A[0, 0] = 1 - r1 * a + 4 * (1 + r1 * a) * g**2 * pW1**2 * nv2 * L**2 / (n * r1 * a)
    A[0, 1] = 2 * (1 + r1 * a) * g**2 * pW1**2 / (r1 * a)
    A[0, 2] = 8 * (1 + r1 * a) * g**2 * pW1**2 * nv2 * L / (r1 * a)    # (28), see above
    A[1, 0] = (1 + r2 * b) * pW2**2 * L**2 / (r2 * b) * (3 * a**2 * pL1**2
                                                         + 6 * nv2 * g**2 * L**2 / n)
    A[1, 1] = 1 - r2 * b + 3 * (1 + r2 * b) * pW2**2 * g**2 * L**2 / (r2 * b)
    A[1, 2] = 12 * (1 + r2 * b) * pW2**2 * nv2 * g**2 * L**3 / (r2 * b)
    A[2, 0] = 3 * g**2 * L**3 / (2 * n) + g * L**2 / n
    A[2, 1] = nv1 * g / n**2 + 3 * nv1 * g**2 * L / (2 * n**2)
    A[2, 2] = 1 - mu * g + 3 * mu * g**2 * L
    return A


def spectral_radius(A: np.ndarray) -> float:
    """Spectral radius of a square matrix: the largest modulus of its eigenvalues."""
    return float(np.max(np.abs(np.linalg.eigvals(A))))


def assumption6(s: Scheme, graph=None, L: float | None = None, mu: float | None = None,
                rho: str = "norm") -> list[Condition]:
    """Assumption 6 for an S2 scheme; ``3 gamma L < 1`` needs L, ``rho_A < 1`` needs the graph,
    L and the PL constant mu (not checkable otherwise, and then not listed)."""
    require(s.name == "S2", "scheme", s.name, "Assumption 6 is about Scheme S2")
    out = [Condition("p_zeta", s.p_zeta, 0 < s.p_zeta < 1, "Assumption 6: 0 < p_zeta < 1"),
           Condition("p_eta", s.p_eta, 0 < s.p_eta < 1, "Assumption 6: 0 < p_eta < 1"),
           Condition("p_m", s.params["p_m"], s.params["p_m"] > 1, "Assumption 6: p_m > 1")]
    if L is not None:
        out.append(Condition("3 gamma L", 3 * s.gamma * L, 3 * s.gamma * L < 1,
                             "Assumption 6: 3 gamma L < 1"))
    if graph is not None and L is not None and mu is not None:
        r = spectral_radius(lemma2_matrix(graph, s.alpha, s.beta, s.gamma, L, mu, rho))
        out.append(Condition(f"rho_A (Lemma 2, rho_X as spectral {rho})", r, r < 1,
                             "Assumption 6: rho_A < 1"))
    return out


def lemma3_steps(K1: float) -> tuple[float, float, float]:
    """Lemma 3's step sizes ``(K1^-0.8, K1^-0.7, 1/K1)``."""
    positive("K1", K1)
    return K1 ** -0.8, K1 ** -0.7, 1.0 / K1


def lemma3_K1(graph, L: float, mu: float, rho: str = "norm", max_power: int = 60) -> float | None:
    """Smallest ``K1 = 2^j`` (j <= max_power) whose Lemma 3 step sizes give ``rho_A < 1`` (and
    nonnegative ``I - alpha L1``, ``I - beta L2``), or None."""
    for j in range(max_power + 1):
        a, b, g = lemma3_steps(2.0 ** j)
        if a > graph.alpha_max() or b > graph.beta_max():
            continue
        if spectral_radius(lemma2_matrix(graph, a, b, g, L, mu, rho)) < 1:
            return 2.0 ** j
    return None
