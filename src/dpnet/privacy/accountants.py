"""Accountants by name: the papers' theorems registered per algorithm, and generic ones.

An accountant is a function ``fn(algorithm, problem, graph, iterations, assumptions, **options)
-> PrivacyGuarantee``. Theorem accountants are registered for an algorithm class (and serve its
subclasses) with :func:`register`; generic accountants (:func:`register_generic`) read the
algorithm's :meth:`mechanism` (:mod:`dpnet.privacy.mechanism`) and so apply to any algorithm that
describes its releases: a new accountant reaches existing algorithms without editing them.

Built-in generic accountants:

* ``laplace``: basic composition of the Laplace releases, ``sum_t Delta_t / b_t`` (pure epsilon);
* ``rdp``: dp-accounting's Renyi-DP accountant over the Laplace / Gaussian (Poisson-subsampled)
  releases, epsilon at the assumptions' ``delta`` (which must be given: none is assumed);
  Gaussian releases on batches drawn without replacement by the symmetrised pair of
  :mod:`.without_replacement` (its Renyi divergence; under ``pld`` its PLD);
* ``pld``: dp-accounting's privacy-loss-distribution accountant over the same events: the
  tightest (epsilon, delta) dpnet has (pessimistic discretisation, so never below the truth).

:func:`account` is what ``Algorithm.privacy`` calls: it splits the keyword constants into
assumptions (:data:`~dpnet.privacy.assumptions.ASSUMPTIONS`) and the chosen accountant's own
options, and refuses any other name, listing the known ones.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..errors import ParameterError, UnknownNameError
from ..registry import Registry, calling_module
from . import dp_accounting_bridge as bridge
from . import dp_sgd, without_replacement
from .assumptions import ASSUMPTIONS, Assumptions, check_names
from .guarantee import PrivacyGuarantee
from .mechanism import Mechanism, Releases


def required_delta(assumptions: Assumptions, accountant: str) -> float:
    """The delta an (epsilon, delta) accountant reports epsilon at: given, never assumed."""
    if assumptions.delta is None:
        raise ParameterError("delta", None, f"a delta for the (epsilon, delta) accountant "
                             f"{accountant!r}, e.g. delta=1e-5 (none is assumed)")
    return assumptions.delta


@dataclass(frozen=True)
class Accountant:
    """A registered accountant: its ``name``, the function
    ``fn(algorithm, problem, graph, iterations, assumptions, **options) -> PrivacyGuarantee``, a one-line
    ``description``, the algorithm class it serves (``cls``; None: generic) and whether it gives pure
    epsilon-DP (``pure``)."""
    name: str
    fn: Callable[..., PrivacyGuarantee]
    description: str
    #: the algorithm class it serves (and its subclasses); None: every algorithm with a mechanism
    cls: type | None = None
    #: pure epsilon-DP (delta = 0): a delta given to it would go unused, so it is refused
    pure: bool = False

    @property
    def generic(self) -> bool:
        """Whether the accountant serves every algorithm that describes its releases (``cls`` is None),
        rather than one algorithm class and its subclasses."""
        return self.cls is None

    @property
    def options(self) -> tuple[str, ...]:
        """Keyword options the accountant takes beyond the assumptions."""
        params = list(inspect.signature(self.fn).parameters.values())[5:]
        return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY
                     or p.kind is p.POSITIONAL_OR_KEYWORD)


#: every accountant, keyed ``"<class qualname>:<name>"`` (``"*:<name>"`` for the generic ones)
ACCOUNTANTS: Registry[Accountant] = Registry("accountant", "dpnet")


def _key(cls: type | None, name: str) -> str:
    return f"{'*' if cls is None else cls.__module__ + '.' + cls.__qualname__}:{name}"


def register(cls: type, name: str, description: str = "", pure: bool = False) -> Callable:
    """Decorator: ``fn`` is accountant ``name`` of ``cls`` (and of its subclasses); ``pure``: it
    gives pure epsilon-DP."""
    registrant = calling_module()

    def deco(fn):
        summary = description or (fn.__doc__ or "").strip().split("\n")[0]
        ACCOUNTANTS.register(_key(cls, name), Accountant(name, fn, summary, cls, pure),
                             registrant=registrant)
        return fn
    return deco


def register_generic(name: str, description: str, pure: bool = False) -> Callable:
    """Decorator: ``fn(algorithm, problem, graph, iterations, assumptions, **options)`` serves
    every algorithm with a mechanism description."""
    registrant = calling_module()

    def deco(fn):
        ACCOUNTANTS.register(_key(None, name), Accountant(name, fn, description, pure=pure),
                             registrant=registrant)
        return fn
    return deco


def is_pure(name: str) -> bool:
    """Whether the accountants called ``name`` give pure epsilon-DP (a name means one kind of
    guarantee for every algorithm that has it; the layout test checks that they agree)."""
    kinds = {a.pure for a in ACCOUNTANTS.values() if a.name == name}
    if not kinds:
        raise UnknownNameError("accountant", name, {a.name for a in ACCOUNTANTS.values()})
    return kinds == {True}


def describes_mechanism(algorithm) -> bool:
    """Whether the algorithm defines ``mechanism()`` (see :mod:`dpnet.algorithms.base`)."""
    return callable(getattr(algorithm, "mechanism", None))


def available(algorithm) -> dict[str, Accountant]:
    """Every accountant that applies to ``algorithm`` (an instance), by name."""
    out: dict[str, Accountant] = {}
    for klass in reversed(type(algorithm).__mro__):
        out.update({a.name: a for a in ACCOUNTANTS.values() if a.cls is klass})
    if describes_mechanism(algorithm):
        out.update({a.name: a for a in ACCOUNTANTS.values() if a.generic and a.name not in out})
    return out


#: algorithm class -> ``fn(algorithm, problem, graph, iterations, assumptions, orders)``: the RDP
#: curve of a run, for algorithms whose accounts do not go through a mechanism description
RDP_CURVES: Registry[Callable[..., np.ndarray]] = Registry("RDP curve", "dpnet")


def register_rdp_curve(cls: type) -> Callable:
    """Decorator: ``fn`` is the RDP curve of ``cls``'s runs (and its subclasses')."""
    registrant = calling_module()

    def deco(fn):
        RDP_CURVES.register(_key(cls, "rdp_curve"), fn, registrant=registrant)
        return fn
    return deco


def rdp_curve(algorithm, problem, graph, iterations: int, assumptions: Assumptions,
              orders) -> np.ndarray | None:
    """A run's Renyi DP at each of ``orders`` (integers >= 2 are always covered), the largest
    over agents, under the relation its accounts state: the curve registered for its class, else
    its mechanism's releases interpreted as the ``rdp`` accountant does; None where neither
    exists (the run has only its own accountants' epsilons)."""
    for klass in type(algorithm).__mro__:
        fn = RDP_CURVES.get(_key(klass, "rdp_curve"))
        if fn is not None:
            return np.asarray(fn(algorithm, problem, graph, iterations, assumptions, orders),
                              dtype=float)
    if not describes_mechanism(algorithm):
        return None
    groups = _mechanisms(algorithm, problem, graph, iterations, assumptions)
    return np.max([_mechanism_rdp(mech, orders) for _, mech in groups], axis=0)


def every() -> dict[str, list[str]]:
    """``{accountant name: [algorithm classes it is registered for, or "generic"]}``."""
    out: dict[str, list[str]] = {a.name: ["any algorithm with a mechanism"]
                                 for a in ACCOUNTANTS.values() if a.generic}
    for a in ACCOUNTANTS.values():
        if not a.generic:
            assert a.cls is not None                    # generic means exactly cls is None
            out.setdefault(a.name, []).append(getattr(a.cls, "name", a.cls.__name__))
    return dict(sorted(out.items()))


def account(algorithm, problem, graph, iterations: int | None,
            assumptions: Assumptions | dict | None = None, accountant: str | None = None,
            **constants: Any) -> PrivacyGuarantee:
    """The guarantee of ``algorithm`` by ``accountant`` (default: the algorithm's
    ``default_accountant``); see the module docstring for how names are checked."""
    table = available(algorithm)
    name = accountant or getattr(algorithm, "default_accountant", None)
    private = getattr(algorithm, "private", False)
    if name is None and private and describes_mechanism(algorithm):
        # a private algorithm that describes its releases gets the generic PLD account of
        # them, never "no guarantee" for want of a declared default
        name = "pld"
    elif name is None and private:
        raise ParameterError("accountant", None, f"an accountant for the private algorithm "
                             f"{algorithm.name}: it declares no default_accountant and no "
                             "mechanism() for the generic ones")
    if name is None:
        check_names("privacy constant", constants, ASSUMPTIONS)
        Assumptions.of(assumptions, **constants)
        return PrivacyGuarantee.none(f"{algorithm.name} adds no privacy noise", iterations)
    if name not in table:
        raise UnknownNameError(f"accountant of {algorithm.name}", name, table)
    acc = table[name]
    facts, options = split_constants(assumptions, constants, acc.options)
    if acc.pure and facts.delta is not None:
        raise ParameterError("delta", facts.delta, f"no delta: the {name!r} accountant of "
                             f"{algorithm.name} gives pure epsilon-DP (delta = 0), so a delta "
                             "given to it would go unused")
    guarantee = acc.fn(algorithm, problem, graph, iterations, facts, **options)
    if facts.delta is not None and guarantee.delta > facts.delta * (1 + 1e-9):
        # a requested delta is met or refused: a guarantee at a larger delta than asked for is
        # not the guarantee asked for (DO-ADP's theorem1 certifies its own delta ~ 0.04)
        raise ParameterError("delta", facts.delta, f"a delta the {name!r} accountant of "
                             f"{algorithm.name} can meet: it certifies delta = "
                             f"{guarantee.delta:.3g} at this noise; more noise, or one that takes delta "
                             f"({', '.join(sorted(n for n, a in table.items() if not a.pure))})")
    return guarantee


def split_constants(assumptions: Assumptions | dict | None, constants: dict[str, Any],
                    options: Sequence[str] = ()) -> tuple[Assumptions, dict[str, Any]]:
    """``constants`` split into the assumptions (merged over ``assumptions``) and an
    accountant's ``options``; a name that is neither is an error listing the known ones."""
    check_names("privacy constant", constants, list(ASSUMPTIONS) + list(options))
    given = {k: v for k, v in constants.items() if k in ASSUMPTIONS}
    return (Assumptions.of(assumptions, **given),
            {k: v for k, v in constants.items() if k not in ASSUMPTIONS})


# ---- generic accountants ----------------------------------------------------------------------

def _mechanisms(algorithm, problem, graph, iterations, assumptions) -> list[tuple[np.ndarray,
                                                                                   Mechanism]]:
    if iterations is None:
        raise ParameterError("iterations", None, "a finite horizon (a generic accountant composes "
                             "the releases of that many iterations)")
    return algorithm.mechanism(problem, graph, iterations, assumptions)


def per_agent(algorithm, problem, graph, iterations, assumptions, epsilon_of, label: str,
               delta: float) -> PrivacyGuarantee:
    """The guarantee of ``epsilon_of(mechanism)`` for every agent: each group of agents that
    ``algorithm.mechanism(...)`` describes gets its mechanism's epsilon, the largest is the guarantee's,
    at ``delta``; ``label`` names the composition in the theorem line, and the mechanisms' adjacency,
    sources and notes are carried over.

    Raises :class:`~dpnet.errors.ParameterError` when ``iterations`` is None (the releases of a finite
    horizon are composed) or when the mechanism leaves an agent undescribed."""
    groups = _mechanisms(algorithm, problem, graph, iterations, assumptions)
    n = graph.n if graph is not None else problem.n_agents
    per = np.full(n, np.nan)
    sources: set[str] = set()
    notes: list[str] = []
    for agents, mech in groups:
        per[agents] = epsilon_of(mech)
        sources.add(mech.source)
        notes.extend(mech.notes)
    if np.isnan(per).any():
        raise ParameterError("mechanism", algorithm.name, "a description of every agent's releases",
                             f"agents {np.flatnonzero(np.isnan(per))[:5].tolist()} are missing")
    adjacency, relation = groups[0][1].adjacency, groups[0][1].relation
    return PrivacyGuarantee.from_per_agent(
        per, delta=delta, horizon=iterations,
        theorem=f"{label} over {algorithm.name}'s releases",
        assumptions=(f"adjacency: {adjacency} ({relation})", *sorted(sources)),
        notes=tuple(dict.fromkeys(notes)))


@register_generic("laplace", "basic composition of Laplace releases, sum_t Delta_t / b_t (pure "
                  "epsilon)", pure=True)
def laplace_accountant(algorithm, problem, graph, iterations, assumptions) -> PrivacyGuarantee:
    """The generic ``laplace`` accountant: each agent's pure epsilon by basic composition of its Laplace
    releases, ``sum_t Delta_t / b_t``. Raises :class:`~dpnet.errors.ParameterError` for a Gaussian or
    subsampled release (``rdp`` and ``pld`` account those)."""
    def epsilon(mech: Mechanism) -> float:
        total = 0.0
        for r in mech.releases:
            if r.noise != "laplace" or r.sampling != 1.0:
                raise ParameterError("accountant", "laplace", "Laplace releases without "
                                     f"subsampling; {algorithm.name} releases {r.message!r} with "
                                     f"{r.noise} noise (sampling {r.sampling:g}): use rdp or pld")
            total += float(np.sum(1.0 / r.multipliers))
        return total
    return per_agent(algorithm, problem, graph, iterations, assumptions, epsilon,
                      "basic composition of Laplace mechanisms", 0.0)


def _relation(mech: Mechanism) -> str:
    """The dp-accounting relation a mechanism's events are built for: ``"replace_one"`` where
    it has Poisson-subsampled releases under replace-one, else ``"add_remove"`` (for releases
    on the whole data the two relations give the same pair at the stated shift)."""
    sampled = [r for r in mech.releases if r.sampler == "poisson" and r.sampling < 1.0]
    if mech.relation != "replace_one" or not sampled:
        return "add_remove"
    laplace = [r.message for r in mech.releases if r.noise != "gaussian"]
    if laplace:
        raise ParameterError("mechanism", laplace[0], "Gaussian releases only where a "
                             "Poisson-subsampled release is accounted under replace_one "
                             "(dp-accounting has no replace-one event for subsampled Laplace)")
    return "replace_one"


def _dp_events(mech: Mechanism, relation: str) -> list:
    """dp-accounting events of a mechanism for ``relation`` (:func:`_relation`), identical
    releases grouped by self-composition. dp-accounting's ``REPLACE_ONE`` takes a Gaussian's
    multiplier against half the shift (a record's term of norm at most ``sensitivity / 2``)."""
    dpa = bridge.events()
    half = 2.0 if relation == "replace_one" else 1.0
    events = []
    for r in mech.releases:
        values, counts = np.unique(r.multipliers, return_counts=True)
        for m, c in zip(values.tolist(), counts.tolist()):
            if math.isinf(m):
                continue                               # nothing sensitive is released
            if m == 0:
                events.append(dpa.NonPrivateDpEvent())
                continue
            ev = dpa.LaplaceDpEvent(m) if r.noise == "laplace" else dpa.GaussianDpEvent(half * m)
            if r.sampling < 1.0:
                ev = dpa.PoissonSampledDpEvent(r.sampling, ev)
            events.append(dpa.SelfComposedDpEvent(ev, c) if c > 1 else ev)
    return events


def _events_rdp(events: list, relation: str, orders: np.ndarray) -> np.ndarray:
    """RDP of the events at ``orders``. dp-accounting's RDP has no Poisson replace-one event:
    there each subsampled Gaussian step takes :func:`dp_sgd.poisson_step_rdp` (the pair's own
    divergence or the group-of-two bound, whichever is smaller)."""
    dpa = bridge.events()
    if relation == "add_remove":
        return bridge.rdp_curve(dpa.ComposedDpEvent(events), orders)
    total = np.zeros(orders.shape)
    for ev in events:
        count = 1
        if isinstance(ev, dpa.SelfComposedDpEvent):
            ev, count = ev.event, ev.count
        if isinstance(ev, dpa.PoissonSampledDpEvent):
            total += count * dp_sgd.poisson_step_rdp(ev.event.noise_multiplier,
                                                     ev.sampling_probability, orders)
        else:   # a Gaussian step on the whole data: the REPLACE_ONE shift is 2 / multiplier
            total += count * bridge.rdp_curve(dpa.GaussianDpEvent(ev.noise_multiplier / 2),
                                              orders)
    return total


#: above this RDP/pure epsilon the PLD account is not attempted (it would only tighten an epsilon
#: no one targets; calibration explores such noise levels on its way and must not overflow)
PLD_CEILING = 100.0


def _without_replacement_epsilon(mech: Mechanism, delta: float, kind: str) -> float:
    """Gaussian releases on batches drawn without replacement: the symmetrised pairs composed
    (PLD), or their Renyi divergences (RDP); dp-accounting has no event for the pair."""
    parts = _without_replacement_parts(mech)
    if parts is None:
        return math.inf
    if not parts:
        return 0.0
    rdp_eps = bridge.rdp_epsilon_of_curve(lambda orders: cast(np.ndarray, sum(   # parts non-empty
        c * without_replacement.rdp_curve(m, g, orders) for m, c, g in parts)), delta)
    if kind == "rdp" or rdp_eps > PLD_CEILING:
        return rdp_eps
    interval = max(1e-4, rdp_eps / 2e4)
    pld = None
    for m, c, g in parts:
        step = without_replacement.step_pld(m, g, interval)
        step = step.self_compose(c) if c > 1 else step
        pld = step if pld is None else pld.compose(step)
    assert pld is not None                              # parts is not empty
    return min(float(pld.get_epsilon_for_delta(delta)), rdp_eps)


def _without_replacement_parts(mech: Mechanism) -> list[tuple[float, int, float]] | None:
    """(multiplier, count, rate) of each distinct sensitive release; None if one is noiseless.
    Every release must be Gaussian on a batch without replacement."""
    bad = [r.message for r in mech.releases
           if r.noise != "gaussian" or r.sampler != "without_replacement"]
    if bad:
        raise ParameterError("mechanism", bad[0], "Gaussian releases only, when any release "
                             "samples without replacement (the generic accountants compose "
                             "that pair with no other)")
    parts = []
    for r in mech.releases:
        values, counts = np.unique(r.multipliers, return_counts=True)
        for m, c in zip(values.tolist(), counts.tolist()):
            if m == 0:
                return None
            if not math.isinf(m):
                parts.append((m, c, r.sampling))
    return parts


def _mechanism_rdp(mech: Mechanism, orders) -> np.ndarray:
    """The releases' RDP at ``orders``, composed (the ``rdp`` accountant's curve)."""
    a = np.asarray(orders, dtype=float)
    if any(r.sampler == "without_replacement" for r in mech.releases):
        parts = _without_replacement_parts(mech)
        if parts is None:
            return np.full(a.shape, np.inf)
        return sum((c * without_replacement.rdp_curve(m, g, a) for m, c, g in parts),
                   np.zeros(a.shape))
    dpa = bridge.events()
    relation = _relation(mech)
    events = _dp_events(mech, relation)
    if any(isinstance(e, dpa.NonPrivateDpEvent) for e in events):
        return np.full(a.shape, np.inf)
    return _events_rdp(events, relation, a) if events else np.zeros(a.shape)


def _dp_accounting_epsilon(mech: Mechanism, delta: float, kind: str) -> float:
    if any(r.sampler == "without_replacement" for r in mech.releases):
        return _without_replacement_epsilon(mech, delta, kind)
    dpa = bridge.events()
    relation = _relation(mech)
    events = _dp_events(mech, relation)
    if not events:
        return 0.0
    if any(isinstance(e, dpa.NonPrivateDpEvent) for e in events):
        return math.inf
    if relation == "add_remove":
        rdp_eps = bridge.rdp_epsilon(dpa.ComposedDpEvent(events), delta)
    else:
        rdp_eps = bridge.rdp_epsilon_of_curve(lambda o: _events_rdp(events, relation, o), delta,
                                              extend_orders=False)
    pure = _pure_epsilon(mech)
    if kind == "rdp" or min(rdp_eps, pure) > PLD_CEILING:
        # far above any budget a user targets, a PLD's tightening changes nothing that matters,
        # and its grid (or expm1 of its gap) overflows: the RDP/pure bound stands
        return min(rdp_eps, pure)
    # a PLD's grid spans the privacy loss: at 1e-4 per step, an epsilon of 10^6 would need 10^10
    # points (an out-of-memory kill, not an error). Coarsen the pessimistic grid with the RDP
    # epsilon (the PLD's is below it): the account stays an upper bound, a little looser.
    interval = max(1e-4, min(rdp_eps, pure) / 2e4)
    return min(bridge.pld_epsilon(dpa.ComposedDpEvent(events), delta, interval, relation),
               rdp_eps, pure)


def _pure_epsilon(mech: Mechanism) -> float:
    """Basic composition of the Laplace releases (inf when any release is Gaussian or
    subsampled): a pure-epsilon bound that every (epsilon, delta) account may take instead."""
    total = 0.0
    for r in mech.releases:
        if r.noise != "laplace" or r.sampling != 1.0:
            return math.inf
        total += float(np.sum(1.0 / r.multipliers))
    return total


def _dp_accounting_accountant(kind: str, label: str) -> Callable[..., PrivacyGuarantee]:
    def accountant(algorithm, problem, graph, iterations, assumptions) -> PrivacyGuarantee:
        """A generic (epsilon, delta) accountant over dp-accounting (``rdp`` or ``pld``, by the ``kind``
        it was built for): each agent's epsilon at the assumptions' ``delta`` (required: none is assumed)
        for the releases its mechanism describes; ``rdp`` by Renyi DP, ``pld`` by pessimistic privacy loss
        distributions, each never above the Renyi DP bound nor, for Laplace releases without subsampling,
        their basic composition."""
        # the mechanism's own checks (which gradient bound) come first, then the missing delta
        return per_agent(algorithm, problem, graph, iterations, assumptions,
                         lambda m: _dp_accounting_epsilon(m, required_delta(assumptions, kind),
                                                          kind),
                         f"{label} (dp-accounting) at delta = {assumptions.delta}",
                         assumptions.delta)
    return accountant


rdp_accountant = register_generic(
    "rdp", "dp-accounting's Renyi-DP accountant over the Laplace/Gaussian releases, epsilon at "
    "the delta given")(_dp_accounting_accountant("rdp", "Renyi DP"))
pld_accountant = register_generic(
    "pld", "dp-accounting's privacy loss distributions over the Laplace/Gaussian releases "
    "(pessimistic), epsilon at the delta given")(
    _dp_accounting_accountant("pld", "privacy loss distributions"))


def releases(message: str, noise: str, sensitivity, scale, sampling: float = 1.0,
             sampler: str = "poisson") -> Releases:
    """Shorthand for :class:`~dpnet.privacy.mechanism.Releases`."""
    return Releases(message, noise, sensitivity, scale, sampling, sampler)
