"""The papers' synthetic problems: nonconvex logistic (000 (37), 004 §V), SinCos (000 (38)) and a
strongly convex quadratic with known optimum."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from ..errors import ParameterError, positive, positive_int, require
from ..rng import Streams
from .base import Problem, logistic_curvature, minimize_global
from .stochastic import Clip, LocalRecords, as_clip, sample_indices


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


class NonconvexLogistic(LocalRecords, Problem):
    """Binary classification with a nonconvex regulariser (paper 000 eq. (37), paper 004 §V):

    ``f_i(x) = (1/m_i) sum_j log(1 + exp(-u_ij x^T v_ij)) + sum_s lam*alpha*x_s^2/(1 + alpha*x_s^2)``

    ``features`` has shape ``(n, m, d)`` (the ``v_ij``), ``labels`` ``(n, m)`` with entries +-1;
    ``sizes``: optional local sizes ``m_i <= m`` (agent i's first ``m_i`` rows are its records).
    Global objective: the average ``(1/n) sum_i f_i`` (``convention="sum"`` for paper 004).
    A finite sum over records: minibatches sample local records, and each per-sample gradient
    (its loss term plus the data-free regulariser, as ``l_i`` in Huo et al.) can be clipped."""

    name = "nonconvex_logistic"
    supports_clip = True

    def __init__(self, features, labels, lam: float = 1e-3, alpha: float = 1.0,
                 convention: str = "average", sizes=None) -> None:
        V = torch.as_tensor(np.asarray(features), dtype=torch.float64)
        u = torch.as_tensor(np.asarray(labels), dtype=torch.float64)
        require(V.ndim == 3, "features", tuple(V.shape), "shape (n_agents, samples, dim)")
        require(tuple(u.shape) == tuple(V.shape[:2]), "labels", tuple(u.shape),
                f"shape (n_agents, samples) = {tuple(V.shape[:2])}")
        self._set_sizes(sizes, V.shape[0], V.shape[1])
        V, u = self._clean_padding(V, u)
        require(bool(torch.all(u.abs() == 1)), "labels", "values", "every label is -1 or +1")
        require(convention in ("average", "sum"), "convention", convention, "'average' or 'sum'")
        self.V, self.u = V, u
        self.lam, self.alpha = float(lam), positive("alpha", alpha)
        require(self.lam >= 0, "lam", lam, "lam >= 0")
        self.n_agents, _, self.dim = V.shape
        self.convention = convention
        self.UV = u[:, :, None] * V          # u_ij v_ij, reused by every gradient
        self._L: float | None = None
        self._opt: torch.Tensor | None = None

    @classmethod
    def random(cls, n_agents: int = 6, samples=200, dim: int = 10, seed: int = 0,
               lam: float = 1e-3, alpha: float = 1.0, convention: str = "average",
               feature_scale: float = 1.0) -> NonconvexLogistic:
        """The papers' data: ``v_ij ~ N(0, feature_scale^2 I_d)``, ``u_ij`` uniform on {-1, +1};
        ``samples``: records per agent, one number or one per agent (unequal local sizes: the
        draws of the widest agent, each agent keeping its first ``m_i``)."""
        n, d = (positive_int(k, v) for k, v in (("n_agents", n_agents), ("dim", dim)))
        sizes = None
        if np.ndim(samples) == 0:
            m = positive_int("samples", samples)
        else:
            sizes = np.asarray(samples)
            require(sizes.shape == (n,), "samples", list(np.ravel(sizes)),
                    f"one number or {n} (one per agent)")
            m = int(sizes.max())
        rng = _rng(seed)
        V = feature_scale * rng.standard_normal((n, m, d))
        u = rng.choice([-1.0, 1.0], size=(n, m))
        return cls(V, u, lam=lam, alpha=alpha, convention=convention, sizes=sizes)

    def _sel(self, agents):
        return self._agents(agents), self._rows(self.UV, agents)

    def _keep(self, slots):
        s = self._index(slots)
        self.V, self.u, self.UV = self.V[s], self.u[s], self.UV[s]
        self._keep_sizes(slots)

    def grad(self, X, agents=None):
        a, UV = self._sel(agents)
        z = torch.einsum("nmd,nd->nm", UV, X)              # u x^T v
        # d/dz log(1+e^{-z}) = -sigmoid(-z); the -1/m goes on the small (n, m) factor, and the
        # regulariser 2 lam alpha x / (1 + alpha x^2)^2 is built in place: fewer (n, d) passes
        s = torch.sigmoid(-z).mul_(-self._record_weights(agents))
        g = torch.einsum("nm,nmd->nd", s, UV)
        denominator = (X * X).mul_(self.alpha).add_(1.0).square_()
        return g.addcdiv_(X, denominator, value=2.0 * self.lam * self.alpha)

    def stochastic_grad(self, X, rng: Streams, k, batch_size, agents=None, purpose="sample",
                        clip: Clip | float | None = None):
        a = self._agents(agents)
        B = positive_int("batch_size", batch_size)
        idx = sample_indices(rng, k, a, self.sizes[a], B, purpose, device=self.device)
        G = self.per_sample_grads(self.UV[self._index(self._slot(a))[:, None], idx], X)
        clip = as_clip(clip)
        return (G if clip is None else clip.apply(G)).mean(dim=1)

    def per_sample_grads_at(self, X: torch.Tensor, idx: torch.Tensor, agents=None) -> torch.Tensor:
        """``(n, B, d)`` per-sample gradients of the local records ``idx`` (unclipped)."""
        a = self._agents(agents)
        return self.per_sample_grads(self.UV[self._index(self._slot(a))[:, None], idx], X)

    def per_sample_grads(self, UV: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """``(n, B, d)``: ``-sigmoid(-u v^T x_i) u v + 2 lam alpha x_i / (1 + alpha x_i^2)^2``
        for the samples ``u v`` in UV."""
        s = torch.sigmoid(-torch.einsum("nbd,nd->nb", UV, X))
        reg = 2.0 * self.lam * self.alpha * X / (1.0 + self.alpha * X * X) ** 2
        return -s[:, :, None] * UV + reg[:, None, :]

    def loss_and_grad(self, x):
        """One pass over the data at a single point: ``z = u v^T x`` serves both."""
        self._require_all("the global objective")
        x = self._point(x).reshape(-1)
        z = torch.einsum("nmd,d->nm", self.UV, x)
        ax2 = self.alpha * x * x
        data = float(self._record_mean(torch.nn.functional.softplus(-z)).sum())
        loss = (data + self.n_agents * float((self.lam * ax2 / (1.0 + ax2)).sum())) * self._scale()
        s = torch.sigmoid(-z).mul_(-self._record_weights())
        g = s.reshape(-1) @ self.UV.reshape(-1, self.dim)   # one matvec (einsum: 8x longer)
        g += self.n_agents * 2.0 * self.lam * self.alpha * x / (1.0 + ax2) ** 2
        return loss, g * self._scale()

    def local_loss(self, X, agents=None):
        a, UV = self._sel(agents)
        z = torch.einsum("nmd,nd->nm", UV, X)
        data = self._record_mean(torch.nn.functional.softplus(-z), agents)
        ax2 = self.alpha * X * X
        return data + (self.lam * ax2 / (1.0 + ax2)).sum(dim=1)

    @property
    def smoothness(self) -> float:
        """``max_i lambda_max(V_i^T V_i)/(4m) + 2 lam alpha`` (logistic curvature <= 1/4; the
        regulariser's second derivative is at most ``2 lam alpha``, attained at 0)."""
        if self._L is None:
            self._L = logistic_curvature(self.V, self.sizes) + 2 * self.lam * self.alpha
        return self._L

    def gradient_bound(self) -> float:
        """``max_i (1/m) sum_j ||v_ij|| + sqrt(d) * (9/8) lam sqrt(alpha/3)``: the data term is an
        average of vectors ``-sigmoid(.) u v`` with weights in (0, 1); the regulariser's
        derivative ``2 lam alpha x/(1+alpha x^2)^2`` peaks at ``x = 1/sqrt(3 alpha)``."""
        if self.held is not None:
            return self._held_constant("gradient_bound")
        data = float(self._record_mean(torch.linalg.vector_norm(self.V, dim=2)).max())
        reg = math.sqrt(self.dim) * (9.0 / 8.0) * self.lam * math.sqrt(self.alpha / 3.0)
        return data + reg

    def optimum(self):
        """A stationary point of the global objective by L-BFGS from 0 (the problem is nonconvex),
        computed once: every run on this problem uses it for its distance metric (None on a copy
        holding a subset of the agents, unless computed before :meth:`restrict`)."""
        if self._opt is None and self.held is not None:
            return None
        if self._opt is None:
            self._opt = minimize_global(self)
        return self._opt.clone()

    def describe(self):
        """:meth:`Problem.describe <dpnet.problems.base.Problem.describe>` plus the records per agent
        (``samples``: m, or the list of the ``m_i``) and the regulariser's ``lam`` and ``alpha``."""
        return {**super().describe(), "samples": self._sizes_text(), "lam": self.lam,
                "alpha": self.alpha}


class SinCos(Problem):
    """Paper 000's problem (38): ``f_i(x) = x^T x + 3 sin(x)^T sin(x) + m_i x^T cos(x)`` with
    ``sum_i m_i = 0``, ``m_i != 0``. The global objective ``||x||^2 + 3||sin x||^2`` has the unique
    stationary point 0; the local gradients are unbounded and not globally Lipschitz."""

    name = "sincos"

    def __init__(self, m: Sequence[float], dim: int = 10, tol: float = 1e-9) -> None:
        mm = np.asarray(m, dtype=np.float64)
        require(mm.ndim == 1 and mm.size >= 2, "m", m, "a sequence of at least 2 coefficients")
        require(abs(mm.sum()) <= tol * max(1.0, np.abs(mm).sum()), "m", mm.tolist(),
                "sum_i m_i = 0")
        require(bool(np.all(mm != 0)), "m", mm.tolist(), "m_i != 0 for every agent")
        self.m = torch.from_numpy(mm)
        self.n_agents, self.dim = mm.size, positive_int("dim", dim)

    @classmethod
    def random(cls, n_agents: int = 6, dim: int = 10, seed: int = 0, min_abs: float = 0.1) -> SinCos:
        """``m = z - mean(z)``, ``z ~ N(0, 1)`` (the paper gives no distribution), redrawn until
        every ``|m_i| >= min_abs``."""
        rng = _rng(seed)
        for _ in range(1000):
            z = rng.standard_normal(positive_int("n_agents", n_agents))
            m = z - z.mean()
            if np.all(np.abs(m) >= min_abs):
                m[-1] = -m[:-1].sum()
                return cls(m, dim)
        raise ParameterError("min_abs", min_abs, "a draw with all |m_i| >= min_abs within 1000 tries")

    def grad(self, X, agents=None):
        m = self._rows(self.m, agents)[:, None]
        return 2 * X + 3 * torch.sin(2 * X) + m * (torch.cos(X) - X * torch.sin(X))

    def local_loss(self, X, agents=None):
        m = self._rows(self.m, agents)
        s = torch.sin(X)
        return (X * X).sum(1) + 3 * (s * s).sum(1) + m * (X * torch.cos(X)).sum(1)

    @property
    def global_smoothness(self) -> float:
        """The global objective's Hessian is ``diag(2 + 6 cos 2x) <= 8``."""
        return 8.0

    def _keep(self, slots):
        self.m = self.m[self._index(slots)]

    def optimum(self):
        return torch.zeros(self.dim, dtype=torch.float64, device=self.device)


class Quadratic(Problem):
    """``f_i(x) = 1/2 x^T A_i x - b_i^T x`` with symmetric positive definite ``A_i``; the global
    minimiser is ``(sum_i A_i)^{-1} sum_i b_i`` (either convention)."""

    name = "quadratic"
    cheap_optimum = True

    def __init__(self, A, b) -> None:
        A = torch.as_tensor(np.asarray(A), dtype=torch.float64)
        b = torch.as_tensor(np.asarray(b), dtype=torch.float64)
        require(A.ndim == 3 and A.shape[1] == A.shape[2], "A", tuple(A.shape), "shape (n, d, d)")
        require(tuple(b.shape) == tuple(A.shape[:2]), "b", tuple(b.shape), f"shape {tuple(A.shape[:2])}")
        require(bool(torch.allclose(A, A.transpose(1, 2))), "A", "matrices", "each A_i symmetric")
        ev = torch.linalg.eigvalsh(A)
        require(bool((ev > 0).all()), "A", f"min eigenvalue {float(ev.min()):.3g}",
                "each A_i positive definite")
        self.A, self.b = A, b
        self.n_agents, self.dim = b.shape
        self._L, self.mu = float(ev.max()), float(ev.min())

    @classmethod
    def random(cls, n_agents: int = 10, dim: int = 5, seed: int = 0, mu: float = 0.5,
               L: float = 2.0) -> Quadratic:
        """Eigenvalues uniform in [mu, L] under random rotations; ``b_i ~ N(0, I)``."""
        require(0 < mu <= L, "mu", mu, f"0 < mu <= L = {L}")
        rng = _rng(seed)
        n, d = positive_int("n_agents", n_agents), positive_int("dim", dim)
        Q = np.linalg.qr(rng.standard_normal((n, d, d)))[0]
        lam = rng.uniform(mu, L, size=(n, d))
        A = np.einsum("nij,nj,nkj->nik", Q, lam, Q)
        A = 0.5 * (A + A.transpose(0, 2, 1))
        return cls(A, rng.standard_normal((n, d)))

    def grad(self, X, agents=None):
        A, b = self._rows(self.A, agents), self._rows(self.b, agents)
        return torch.einsum("nij,nj->ni", A, X) - b

    def local_loss(self, X, agents=None):
        A, b = self._rows(self.A, agents), self._rows(self.b, agents)
        return 0.5 * torch.einsum("ni,nij,nj->n", X, A, X) - (b * X).sum(1)

    @property
    def smoothness(self) -> float:
        return self._L

    def _keep(self, slots):
        s = self._index(slots)
        self.A, self.b = self.A[s], self.b[s]

    def optimum(self):
        if self.held is not None:
            return self._held_constant("optimum")
        return torch.linalg.solve(self.A.sum(0), self.b.sum(0))
