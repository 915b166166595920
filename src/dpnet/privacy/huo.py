"""(epsilon, delta) accounting of DO-ADP (Huo, Liu, Ding, Johansson, Shi; paper 001).

The step, per agent and iteration t: with probability p the agent is active, samples B of its q
local records uniformly without replacement (the paper: B = 1), clips every per-sample gradient
per coordinate at ``G/sqrt(d)`` (Assumption 2), adds ``N(0, sigma^2 I_d)`` to the minibatch mean,
and sends Top-k of its new state minus its public copy. Neighbouring datasets differ in one
record of one agent (replace-one). Only the k sent coordinates are counted (eq. (6)): the l2
sensitivity of the averaged gradient on them is ``Delta = 2 G sqrt(k/d) / B``.

Three accounts are implemented.

1. **Theorem 1** as stated: for ``epsilon in (0, 1]``, ``delta0 in (0, 1]``,
   ``sigma^2 >= 160 k p^2 T log(1.25/delta0) G^2 / (q^2 d epsilon^2)``   (7)
   and ``T >= q^2 epsilon^2 / (4 p^2)`` the algorithm is (epsilon, delta)-DP "for some delta".
   :func:`theorem1_sigma`, :func:`theorem1_min_iterations`, :func:`theorem1_epsilon` (eq. (7)
   solved for epsilon), :func:`theorem1_failures` (which hypotheses fail). With B records per
   step the proof goes through with B cancelling from (7) and the horizon condition relaxed to
   ``T >= q^2 epsilon^2 / (4 p^2 B^2)`` (derivation at :func:`theorem1_sigma`).
2. **The proof's step-by-step accountant** (:func:`proof_account`): Gaussian mechanism
   ``eps_t = sqrt(2 log(1.25/delta0)) Delta / sigma`` (Lemma 1); subsampling by activation and
   data sampling ``eps'_t = log(1 + (pB/q)(e^{eps_t} - 1))``, ``delta_t = pB delta0 / q``
   (Lemma 4; the proof then bounds eps'_t by ``2 p eps_t / q``); advanced composition as printed
   in Lemma 5 (Kairouz et al.'s bound with ``sum eps_t^2`` as the last term),
   ``eps~ = sqrt(2 S log(e + sqrt(S)/delta_hat)) + S`` with ``S = T eps'_t^2``, valid for
   ``eps'_t <= 0.9``, and ``delta = 1 - (1 - delta_hat)(1 - delta_t)^T``. The paper chooses
   ``delta_hat = sqrt(S)``, which makes delta large (about eps/sqrt(5) at the bound (7)): it is
   reported, never hidden. The proof writes ``(1 - p delta0)^T`` where Lemma 4 gives
   ``(1 - p delta0/q)^T``: Lemma 4's value is used.
3. **A standard numerical account** through ``dp-accounting`` (:func:`dp_accounting_epsilon`):
   the per-step event is a subsampled Gaussian with noise multiplier ``sigma / Delta`` composed
   T times, by the RDP or the PLD accountant. For sampling without replacement under replace-one
   adjacency a step acts as the remove or the add pair of ``(1-g) N(0, s^2) + g N(Delta, s^2)``
   against ``N(0, s^2)`` depending on the data, so the account composes the one symmetrised pair
   of Dong, Roth & Su's subsampling theorem that covers both (:mod:`.without_replacement`: its
   PLD, or its Renyi divergence), at the replace-one sensitivity Delta. (Until 2026-11-27
   the add and remove types were composed apart and the larger epsilon taken: not a proven
   bound, 2-17 % below the proven one on the leaderboard's rows.) With ``sampler="poisson"`` the
   pair is dp-accounting's Poisson ``REPLACE_ONE`` mixture against mixture. Two modelling
   switches:

   * ``activation="hidden"`` (the paper's Lemma 4): the activation is part of the subsampling,
     ``g = pB/q``, the sampler treated as one draw without replacement at that rate (the paper's
     modelling, kept as a switch). ``activation="visible"``: inactive agents send nothing, so who is active is
     public; the activation then only mixes the step with a public "silent" outcome: the
     per-step RDP becomes ``log(1 + p (exp((a-1) R_a) - 1)) / (a-1)`` of the data-subsampled
     step (``g = B/q``). This is the faithful threat model of Definition 1 (the messages are
     labelled by sender); the paper's p^2 factor in (7) does not survive it. The PLD account
     of it is the Binomial(T, p) mixture of the N-fold compositions
     (:func:`active_step_bins`). It is the default of every accountant registered for DO-ADP
     and DP-DDA; these module functions keep the paper's own formulas (Theorem 1, the proof)
     with the mechanism's p.
   * ``sensitivity="topk"`` (eq. (6)) or ``"full"`` (``2G/B``, all d coordinates: every noisy
     coordinate reaches the state through the momentum and is sent later, and the Top-k support
     is data dependent, two points the paper's argument does not cover).

Calibration (:func:`calibrate_sigma`) returns the smallest sigma (to a relative tolerance) whose
account meets the target, through :func:`dpnet.privacy.calibrate`, which never overshoots.

Worked values (catalogue 2.B; G = 1, delta0 = 1e-5, q = 20000, T = 120000, epsilon = 0.01):
sigma from (7) = 75.1 at (p, k/d) = (1, 1), 60.0 at (0.8, 1), 41.1 at (1, 0.3), 32.9 at
(0.8, 0.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError, require
from . import dp_accounting_bridge as bridge
from . import without_replacement
from .composition import calibrate
from .dp_sgd import SAMPLERS, poisson_step_rdp
from .guarantee import PrivacyGuarantee

ACCOUNTANTS = ("theorem1", "proof", "rdp", "pld")
#: the accountants that read the paper's sampling without replacement (Lemma 4)
PAPER_ACCOUNTANTS = ("theorem1", "proof")


@dataclass(frozen=True)
class DOADPStep:
    """DO-ADP's per-step mechanism for one agent (see the module docstring)."""

    G: float              # clipping bound (Assumption 2: |grad_j| <= G / sqrt(d))
    k: int                # coordinates sent by Top-k
    d: int                # model dimension
    p: float              # activation probability
    q: int                # local records per agent
    T: int                # iterations
    batch_size: int = 1   # records per active step (the paper: 1; Poisson: the expected one)
    #: "fixed": B records without replacement (the paper); "poisson": each record independently
    #: with probability B/q, the sum divided by B (account 3 only)
    sampler: str = "fixed"

    def __post_init__(self) -> None:
        require(self.G > 0 and math.isfinite(self.G), "G", self.G, "0 < G < inf (clipping bound)")
        require(1 <= self.k <= self.d, "k", self.k, f"1 <= k <= d = {self.d}")
        require(0 < self.p <= 1, "p", self.p, "0 < p <= 1")
        require(self.q >= 1, "q", self.q, "q >= 1 local records")
        require(self.T >= 1, "T", self.T, "T >= 1 iterations")
        require(1 <= self.batch_size <= self.q, "batch_size", self.batch_size,
                f"1 <= batch_size <= q = {self.q}")
        require(self.sampler in SAMPLERS, "sampling", self.sampler, f"one of {SAMPLERS}")

    def sensitivity(self, kind: str = "topk") -> float:
        """l2 sensitivity of the averaged clipped gradient on the sent coordinates (eq. (6))."""
        require(kind in ("topk", "full"), "sensitivity", kind, "'topk' or 'full'")
        k = self.k if kind == "topk" else self.d
        return 2.0 * self.G * math.sqrt(k / self.d) / self.batch_size

    @property
    def sampling(self) -> float:
        """Probability that a given record is used in a step: ``p B / q``."""
        return self.p * self.batch_size / self.q

    def require_paper_sampler(self, accountant: str) -> None:
        """Theorem 1 and its proof amplify through sampling without replacement (Lemma 4): they
        do not account the Poisson replace-one pair."""
        require(self.sampler == "fixed" or accountant not in PAPER_ACCOUNTANTS, "accountant",
                accountant, "'pld' or 'rdp' with sampling='poisson' (Theorem 1 and its proof "
                "amplify by sampling without replacement, Lemma 4; the Poisson replace-one pair "
                "is accounted by dp-accounting)")


# ---- Theorem 1 ---------------------------------------------------------------------------------

def theorem1_sigma(epsilon: float, delta0: float, mech: DOADPStep) -> float:
    """The smallest sigma allowed by (7),
    ``sigma^2 >= 160 k p^2 T log(1.25/delta0) G^2 / (q^2 d epsilon^2)``, for any batch size B:
    B cancels. Theorem 1's proof with B of the q records per active step (L = log(1.25/delta0)):

    * Lemma 1 on the minibatch mean, l2 sensitivity ``Delta = 2 G sqrt(k/d) / B`` (eq. (6) for
      one record replaced in a mean of B): ``eps_t = sqrt(2 L) Delta / sigma
      = 2 sqrt(2 k L) G / (B sigma sqrt(d))``, so ``eps_t^2 = 8 k L G^2 / (B^2 sigma^2 d)``;
    * Lemma 4 with activation p and B of q records drawn without replacement (replace-one;
      Balle, Barthe & Gaboardi 2018 for B > 1), rate ``pB/q``:
      ``eps'_t = log(1 + (pB/q)(e^{eps_t} - 1)) <= 2 (pB/q) eps_t`` (needs ``e^{eps_t} - 1 <=
      2 eps_t``, true for ``eps_t^2 <= 1/5``), ``delta_t = pB delta0 / q``;
    * ``2 (pB/q) eps_t = 4 p sqrt(2 k L) G / (q sigma sqrt(d))``: **B cancels**, and
      ``sum_t eps'_t^2 <= 32 T p^2 k L G^2 / (q^2 sigma^2 d) <= epsilon^2 / 5`` is (7) itself;
    * (8) becomes ``eps_t^2 <= q^2 epsilon^2 / (20 p^2 T B^2) <= 1/5``, which holds for
      ``T >= q^2 epsilon^2 / (4 p^2 B^2)`` (:func:`theorem1_min_iterations`); then
      ``eps'_t <= 2 eps_t <= 0.9`` (pB/q <= 1) and Lemma 5 with ``delta_hat = sqrt(S)`` gives
      ``eps~ <= sqrt(3/5) epsilon + epsilon/5 <= epsilon`` exactly as for B = 1.

    (The B-dependent factors are ``1/B`` in Delta and ``B`` in the rate; dividing sigma by B as
    well, as this function once did, certified an epsilon B times too small.)"""
    _check_eps_delta(epsilon, delta0)
    m = mech
    if epsilon ** 2 == 0.0:     # an epsilon so small its square underflows: no finite sigma
        return math.inf
    var = (160.0 * m.k * m.p ** 2 * m.T * math.log(1.25 / delta0) * m.G ** 2
           / (m.q ** 2 * m.d * epsilon ** 2))
    return math.sqrt(var)


def theorem1_epsilon(sigma: float, delta0: float, mech: DOADPStep) -> float:
    """(7) solved for epsilon: ``epsilon = sqrt(160 k p^2 T log(1.25/delta0) G^2 / (q^2 d))
    / sigma``, the epsilon Theorem 1 certifies for this sigma (when its other hypotheses hold);
    independent of the batch size B (see :func:`theorem1_sigma`)."""
    require(sigma > 0, "sigma", sigma, "sigma > 0")
    return theorem1_sigma(1.0, delta0, mech) / sigma


def theorem1_min_iterations(epsilon: float, p: float, q: int, batch_size: int = 1) -> float:
    """Theorem 1's horizon condition ``T >= q^2 epsilon^2 / (4 p^2)`` (B = 1, as stated), with B
    records per step ``T >= q^2 epsilon^2 / (4 p^2 B^2)``: what makes (8)'s
    ``eps_t^2 = q^2 epsilon^2 / (20 p^2 T B^2)`` at most 1/5 (see :func:`theorem1_sigma`)."""
    require(0 < p <= 1, "p", p, "0 < p <= 1")
    require(q >= 1, "q", q, "q >= 1 local records")
    require(1 <= batch_size <= q, "batch_size", batch_size, f"1 <= batch_size <= q = {q}")
    return q ** 2 * epsilon ** 2 / (4.0 * p ** 2 * batch_size ** 2)


def theorem1_failures(epsilon: float, sigma: float, delta0: float, mech: DOADPStep) -> list[str]:
    """The hypotheses of Theorem 1 that do not hold (empty when it applies)."""
    out = []
    if not 0 < epsilon <= 1:
        out.append(f"epsilon = {epsilon:g} is outside (0, 1]")
    if not 0 < delta0 <= 1:
        out.append(f"delta0 = {delta0:g} is outside (0, 1]")
    T_min = theorem1_min_iterations(epsilon, mech.p, mech.q, mech.batch_size)
    if mech.T < T_min:
        out.append(f"T = {mech.T} < q^2 eps^2 / (4 p^2) = {T_min:.6g}" if mech.batch_size == 1
                   else f"T = {mech.T} < q^2 eps^2 / (4 p^2 B^2) = {T_min:.6g} "
                   f"(B = {mech.batch_size})")
    bound = theorem1_sigma(epsilon, delta0, mech) if 0 < epsilon and 0 < delta0 <= 1 else math.inf
    if sigma < bound * (1 - 1e-12):
        out.append(f"sigma = {sigma:.6g} < the bound (7) = {bound:.6g}")
    return out


# ---- the proof's accountant --------------------------------------------------------------------

@dataclass(frozen=True)
class ProofAccount:
    """Every quantity of Theorem 1's proof for one sigma (see the module docstring)."""

    sigma: float
    delta0: float
    mechanism: DOADPStep
    sensitivity: float          # Delta
    eps_step: float             # eps_t (Lemma 1)
    eps_step_amplified: float   # eps'_t (Lemma 4, exact form)
    eps_step_proof_bound: float  # 2 p B eps_t / q (the proof's bound on eps'_t)
    delta_step: float           # p B delta0 / q
    S: float                    # T eps'_t^2
    delta_hat: float
    epsilon: float              # eps~ (Lemma 5 as printed)
    delta: float                # 1 - (1 - delta_hat)(1 - delta_t)^T
    failures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        """Whether every requirement of Lemmas 4-5 holds for this sigma (no ``failures``)."""
        return not self.failures

    def as_dict(self) -> dict:
        """The proof's quantities by name (sigma, delta0, Delta, the per-step epsilons and delta, S,
        delta_hat, epsilon, delta) and the ``failures`` as a list; the mechanism is left out."""
        out = {k: getattr(self, k) for k in ("sigma", "delta0", "sensitivity", "eps_step",
                                              "eps_step_amplified", "eps_step_proof_bound",
                                              "delta_step", "S", "delta_hat", "epsilon", "delta")}
        out["failures"] = list(self.failures)
        return out


def proof_account(sigma: float, delta0: float, mech: DOADPStep, delta_hat: float | None = None,
                  amplification: str = "exact") -> ProofAccount:
    """The step-by-step accountant of Theorem 1's proof. ``delta_hat=None`` takes the paper's
    ``sqrt(S)``; ``amplification="proof"`` uses the proof's bound ``2 p B eps_t / q`` instead of
    Lemma 4's exact ``log(1 + (pB/q)(e^{eps_t} - 1))`` (it is an upper bound only while
    ``e^{eps_t} - 1 <= 2 eps_t``). ``failures`` lists the violated requirements of Lemmas 4-5."""
    require(sigma > 0, "sigma", sigma, "sigma > 0")
    require(0 < delta0 <= 1, "delta0", delta0, "0 < delta0 <= 1")
    require(amplification in ("exact", "proof"), "amplification", amplification,
            "'exact' or 'proof'")
    m = mech
    Delta = m.sensitivity("topk")
    eps_t = math.sqrt(2.0 * math.log(1.25 / delta0)) * Delta / sigma
    g = m.sampling
    exact = math.log1p(g * math.expm1(eps_t)) if eps_t < 700 else eps_t + math.log(g)
    bound = 2.0 * g * eps_t
    failures = []
    if amplification == "proof":
        eps_amp = bound
        if math.expm1(eps_t) > 2 * eps_t:
            failures.append(f"eps_t = {eps_t:.4g}: e^eps_t - 1 > 2 eps_t, so 2 p eps_t/q does not "
                            "bound Lemma 4's eps'_t")
    else:
        eps_amp = exact
    if eps_amp > 0.9:
        failures.append(f"eps'_t = {eps_amp:.4g} > 0.9 (Lemma 5 needs eps'_t in (0, 0.9])")
    delta_t = g * delta0
    S = m.T * eps_amp ** 2
    if delta_hat is None:
        delta_hat = math.sqrt(S)
    if not 0 < delta_hat <= 1:
        failures.append(f"delta_hat = {delta_hat:.4g} is outside (0, 1] (Lemma 5)")
    dh = min(max(delta_hat, 1e-300), 1.0)
    eps_tilde = math.sqrt(2.0 * S * math.log(math.e + math.sqrt(S) / dh)) + S
    delta = -math.expm1(math.log1p(-dh) + m.T * math.log1p(-delta_t)) if dh < 1 else 1.0
    return ProofAccount(sigma, delta0, m, Delta, eps_t, exact, bound, delta_t, S, delta_hat,
                        eps_tilde, delta, tuple(failures))


def delta_hat_for(delta: float, delta0: float, mech: DOADPStep) -> float:
    """The ``delta_hat`` that makes Lemma 5's total ``1 - (1-delta_hat)(1-delta_t)^T`` equal
    ``delta`` (non-positive when ``delta0`` alone already spends it)."""
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    log_keep = mech.T * math.log1p(-mech.sampling * delta0)
    return -math.expm1(math.log1p(-delta) - log_keep)


# ---- dp-accounting -----------------------------------------------------------------------------

def dp_accounting_epsilon(sigma: float, delta: float, mech: DOADPStep, method: str = "rdp",
                          activation: str = "visible", sensitivity: str = "topk",
                          pld_discretization: float | None = None, pair_rdp: bool = True
                          ) -> float:
    """Epsilon at ``delta`` of T compositions of the subsampled Gaussian step (module
    docstring, account 3) by dp-accounting's RDP or PLD accountant (``pair_rdp=False``: Poisson
    steps by the group-of-two bound only, the cheap bound a PLD account is checked against),
    the PLD on a grid
    :func:`~dpnet.privacy.dp_accounting_bridge.fine_enough` unless ``pld_discretization`` is
    given."""
    require(sigma > 0, "sigma", sigma, "sigma > 0")
    require(0 < delta < 1, "delta", delta, "0 < delta < 1")
    require(method in ("rdp", "pld"), "method", method, "'rdp' or 'pld'")
    require(activation in ("hidden", "visible"), "activation", activation,
            "'hidden' or 'visible'")
    # Poisson: a mixture against a mixture whose components lie G/B from the centre
    # (REPLACE_ONE); fixed batch: the symmetrised pair of sampling without replacement at the
    # replace-one shift 2G/B (module docstring, account 3)
    poisson = mech.sampler == "poisson"
    z = sigma / mech.sensitivity(sensitivity) * (2.0 if poisson else 1.0)

    def step_pld(rate, disc):
        if poisson:
            return bridge.gaussian_step_pld(z, rate, disc, "replace_one")
        return without_replacement.step_pld(z, rate, disc)

    span = bridge.gaussian_loss_span(z / 2) if poisson else without_replacement.span(z)
    # RDP bounds the PLD account: where its grid would not fit in memory, RDP stands
    def rdp() -> float:
        return dp_accounting_epsilon(sigma, delta, mech, "rdp", activation, sensitivity,
                                     pair_rdp=False)

    if method == "rdp":
        return bridge.rdp_epsilon_of_curve(
            lambda orders: rdp_curve(sigma, mech, orders, activation, sensitivity, pair_rdp),
            delta)
    if activation == "hidden" or mech.p == 1:    # p = 1: no activation to hide or show
        return bridge.fine_enough(
            lambda disc: float(step_pld(mech.sampling, disc).self_compose(mech.T)
                               .get_epsilon_for_delta(delta)),
            pld_discretization, bound=rdp, span=span)
    g = mech.batch_size / mech.q
    counts, weights, tail = active_step_bins(mech.T, mech.p, delta * 1e-3)
    return bridge.fine_enough(lambda disc: bridge.pld_epsilon_public_count(
        step_pld(g, disc), counts, weights, tail, delta), pld_discretization, bound=rdp,
        span=span)


def rdp_curve(sigma: float, mech: DOADPStep, orders, activation: str = "visible",
              sensitivity: str = "topk", pair_rdp: bool = True) -> np.ndarray:
    """RDP at ``orders`` of the T steps of :func:`dp_accounting_epsilon` (its RDP account):
    T times the step's curve, hidden activation counted as subsampling at rate p B / q; visible
    activation as the public Binomial number of active steps,
    ``T log1p(p expm1((a-1) R(a))) / (a-1)`` with R the step's curve at rate B / q."""
    orders = np.asarray(orders, dtype=float)
    poisson = mech.sampler == "poisson"
    z = sigma / mech.sensitivity(sensitivity) * (2.0 if poisson else 1.0)

    def step_curve(rate):
        if poisson:
            return poisson_step_rdp(z, rate, orders, pair_rdp)
        return without_replacement.rdp_curve(z, rate, orders)

    if activation == "hidden" or mech.p == 1:
        return mech.T * step_curve(mech.sampling)
    base = step_curve(mech.batch_size / mech.q)
    with np.errstate(over="ignore"):
        mixed = np.log1p(mech.p * np.expm1((orders - 1) * base)) / (orders - 1)
    return mech.T * np.where(np.isfinite(mixed), mixed, base)  # overflow: no gain


#: bins of the number of active steps in the visible-activation PLD account
VISIBLE_BINS = 24


def active_step_bins(T: int, p: float, tail: float) -> tuple[np.ndarray, np.ndarray, float]:
    """``(counts, weights, tail_mass)`` of N ~ Binomial(T, p) active steps for
    :func:`dp_accounting_bridge.pld_epsilon_public_count`: at most :data:`VISIBLE_BINS` bins up to
    the count whose upper tail is below ``tail``; each bin is charged its largest count."""
    from scipy import stats

    top = int(stats.binom.isf(tail, T, p)) + 1 if p < 1 else T
    top = min(max(top, 1), T)
    low = int(stats.binom.ppf(1e-12, T, p)) if p < 1 else T
    counts = np.unique(np.linspace(max(low, 1), top, VISIBLE_BINS).round().astype(int))
    cdf = stats.binom.cdf(counts, T, p)
    weights = np.diff(np.concatenate([[0.0], cdf]))
    return counts, weights, float(stats.binom.sf(counts[-1], T, p))


# ---- calibration and the guarantee -------------------------------------------------------------

def epsilon_of(sigma: float, mech: DOADPStep, accountant: str = "proof", delta0: float = 1e-5,
               delta: float | None = None, **kw) -> float:
    """Epsilon of one accountant at sigma: ``"theorem1"`` (eq. (7) inverted; ``inf`` when a
    hypothesis other than the sigma bound fails), ``"proof"`` (eps~; ``delta`` given: the
    ``delta_hat`` that spends exactly it; ``inf`` when Lemma 4-5's requirements fail),
    ``"rdp"``/``"pld"`` (at ``delta``, which must be given)."""
    require(accountant in ACCOUNTANTS, "accountant", accountant, f"one of {ACCOUNTANTS}")
    mech.require_paper_sampler(accountant)
    if accountant == "theorem1":
        eps = theorem1_epsilon(sigma, delta0, mech)
        bad = [f for f in theorem1_failures(eps, sigma, delta0, mech) if "sigma" not in f]
        return math.inf if bad else eps
    if accountant == "proof":
        dh = None if delta is None else delta_hat_for(delta, delta0, mech)
        acc = proof_account(sigma, delta0, mech, delta_hat=dh, **kw)
        return acc.epsilon if acc.valid else math.inf
    require(delta is not None, "delta", delta, f"a delta for the (epsilon, delta) accountant "
            f"{accountant!r}, e.g. delta=1e-5 (none is assumed)")
    assert delta is not None                            # the require above raised otherwise
    return dp_accounting_epsilon(sigma, delta, mech, accountant, **kw)


def calibrate_sigma(epsilon: float, mech: DOADPStep, accountant: str = "proof",
                    delta0: float = 1e-5, delta: float | None = None, rel_tol: float = 1e-6,
                    **kw) -> float:
    """Smallest sigma (to ``rel_tol``) whose ``accountant`` epsilon is at most ``epsilon``
    (never above it). ``"theorem1"`` returns the bound (7) itself and raises when another
    hypothesis of Theorem 1 fails."""
    require(epsilon > 0, "epsilon", epsilon, "epsilon > 0")
    mech.require_paper_sampler(accountant)
    if accountant == "theorem1":
        sigma = theorem1_sigma(epsilon, delta0, mech)
        bad = theorem1_failures(epsilon, sigma, delta0, mech)
        if bad:
            raise ParameterError("accountant", "theorem1", "the hypotheses of Theorem 1",
                                 "; ".join(bad) + " (use accountant='proof', 'rdp' or 'pld')")
        return sigma
    if accountant == "proof" and delta is not None and delta_hat_for(delta, delta0, mech) <= 0:
        raise ParameterError("delta", delta, f"more than the (1 - p B delta0/q)^T part "
                             f"{-math.expm1(mech.T * math.log1p(-mech.sampling * delta0)):.3g}",
                             "lower delta0")
    lo, hi = 1e-6 * mech.sensitivity(), mech.sensitivity()
    if accountant == "pld":
        # the PLD of a tiny sigma does not fit in memory: bracket with the RDP answer (RDP's
        # epsilon is never below PLD's up to discretisation, so sigma_pld <= sigma_rdp)
        rel_tol = max(rel_tol, 1e-4)
        hi = calibrate_sigma(epsilon, mech, "rdp", delta0, delta, 1e-2, **kw)
        lo = hi / 4
    return calibrate(lambda s: epsilon_of(s, mech, accountant, delta0, delta, **kw), epsilon,
                     lo=lo, hi=hi, rel_tol=rel_tol)


def guarantee(sigma: float, mech: DOADPStep, accountant: str = "theorem1", delta0: float = 1e-5,
              delta: float | None = None, name: str = "doadp", **kw) -> PrivacyGuarantee:
    """The per-agent guarantee of a DO-ADP run with noise sigma (all agents share it)."""
    m = mech
    m.require_paper_sampler(accountant)
    batch = (f"batch {m.batch_size}" if m.sampler == "fixed" else
             f"Poisson sampling at rate {m.batch_size}/{m.q} (expected batch {m.batch_size})")
    assumptions = [f"Assumption 2: |grad l_j| <= G/sqrt(d), G = {m.G:g} (per-coordinate clipping)",
                   f"q = {m.q} records per agent, {batch}, p = {m.p:g}, "
                   f"k/d = {m.k}/{m.d}", "replace-one adjacency of one record"]
    if accountant == "theorem1":
        eps = theorem1_epsilon(sigma, delta0, m)
        bad = theorem1_failures(eps, sigma, delta0, m)
        if bad:
            raise ParameterError("accountant", "theorem1", "the hypotheses of Theorem 1",
                                 "; ".join(bad) + " (use accountant='proof', 'rdp' or 'pld')")
        acc = proof_account(sigma, delta0, m)
        return PrivacyGuarantee(eps, acc.delta, (eps,), m.T,
                                "Theorem 1 of Huo et al. (paper 001), eq. (7) solved for epsilon",
                                tuple(assumptions + [f"delta0 = {delta0:g}"]),
                                (f"delta from the proof's construction (delta_hat = sqrt(S)): "
                                 f"{acc.delta:.4g}",))
    if accountant == "proof":
        dh = None if delta is None else delta_hat_for(delta, delta0, m)
        acc = proof_account(sigma, delta0, m, delta_hat=dh, **kw)
        if not acc.valid:
            raise ParameterError("accountant", "proof", "the requirements of Lemmas 4-5",
                                 "; ".join(acc.failures))
        notes = [f"eps_t = {acc.eps_step:.4g}, eps'_t = {acc.eps_step_amplified:.4g}, "
                 f"S = {acc.S:.4g}, delta_hat = {acc.delta_hat:.4g}"]
        notes += [f"Theorem 1 itself does not apply: {f}"
                  for f in theorem1_failures(acc.epsilon, sigma, delta0, m)]
        return PrivacyGuarantee(acc.epsilon, acc.delta, (acc.epsilon,), m.T,
                                "step-by-step accountant of Theorem 1's proof (Lemmas 1, 4, 5) "
                                "of Huo et al. (paper 001)",
                                tuple(assumptions + [f"delta0 = {delta0:g}"]), tuple(notes))
    require(delta is not None, "delta", delta, f"a delta for the (epsilon, delta) accountant "
            f"{accountant!r}, e.g. delta=1e-5 (none is assumed)")
    assert delta is not None                            # the require above raised otherwise
    dl = delta
    eps = dp_accounting_epsilon(sigma, dl, m, accountant, **kw)
    act = kw.get("activation", "visible")
    return PrivacyGuarantee(eps, dl, (eps,), m.T,
                            f"subsampled Gaussian composed {m.T} times, dp-accounting "
                            f"{accountant.upper()} (activation {act}, sensitivity "
                            f"{kw.get('sensitivity', 'topk')})", tuple(assumptions))


def _check_eps_delta(epsilon: float, delta0: float) -> None:
    require(epsilon > 0 and math.isfinite(epsilon), "epsilon", epsilon, "0 < epsilon < inf")
    require(0 < delta0 <= 1, "delta0", delta0, "0 < delta0 <= 1")
