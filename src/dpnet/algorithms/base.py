"""Algorithm base class, the per-run context, and the registry.

An algorithm is a small object holding hyper-parameters (named as in its paper, validated on
construction) with two methods over stacked state:

* ``init(ctx, x0) -> state``: a dict of named ``(n_local, d)`` (or halo) tensors, ``state["x"]``
  being the iterates;
* ``step(ctx, state, k) -> state``: iteration k, using only tensor algebra on the local rows and
  the :class:`~dpnet.network.Network` (``ctx.net``) for anything that crosses between agents.

Private algorithms set ``default_accountant`` and register their theorems as named accountants
(:mod:`dpnet.privacy.accountants`); ``privacy()`` and ``calibrate()`` live here, once, and
an algorithm that also defines ``mechanism(problem, graph, iterations, assumptions)`` -> a list
of ``(agents, dpnet.privacy.mechanism.Mechanism)`` groups (what one protected agent's data
influences, agents sharing their noise parameters grouped) is served by the generic accountants
too (``laplace``, ``rdp``, ``pld``). Algorithms whose mechanism is not a Laplace/Gaussian release
(the quantizer baselines) do not define it, and those accountants are not offered for them.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

import numpy as np
import torch

from .. import lattice
from ..errors import ParameterError, UnknownNameError, require
from ..graphs import Graph
from ..network import Network
from ..noise import Gaussian, Laplace, Noise
from ..privacy import accountants
from ..privacy.assumptions import Assumptions
from ..privacy.calibration import calibrate
from ..privacy.guarantee import PrivacyGuarantee
from ..problems.base import Problem
from ..registry import Registry, resolve
from ..rng import Streams

if TYPE_CHECKING:
    from ..secret_rng import SecretStreams

State = dict[str, torch.Tensor]


@dataclass
class Context:
    """Everything a step may use: the problem, the network door and the run's random streams."""

    problem: Problem
    net: Network
    rng: Streams
    #: pure-DP slack of this process's lattice releases so far (:meth:`perturb`, secret mode)
    lattice_slack: float = 0.0
    #: the largest factor - 1 by which a Gaussian lattice release raised its noise (secret mode)
    lattice_bump: float = 0.0
    #: per iteration, a lower bound on the l2 sensitivity the run's account assumes for each
    #: Gaussian release (:meth:`Algorithm.lattice_floor`; set by the runner in secret mode);
    #: None: unknown, Gaussian releases are then drawn in floating point
    lattice_floor: np.ndarray | None = None
    #: why :attr:`lattice_floor` is None (set by the runner with it)
    lattice_floor_reason: str = ""
    #: whether a secret run drew a Gaussian release in floating point (no :attr:`lattice_floor`)
    float_gaussian: bool = False

    @property
    def n(self) -> int:
        """Number of agents in the whole network, n (not only those this process holds)."""
        return self.net.n

    @property
    def dim(self) -> int:
        """Dimension d of the decision variable (the problem's ``dim``)."""
        return self.problem.dim

    @property
    def agents(self) -> np.ndarray:
        """Global indices of the agents whose rows this process holds (``ctx.net.agents``)."""
        return self.net.agents

    def grad(self, X: torch.Tensor, batch_size: int | None = None, k: int = 0,
             purpose: str = "sample") -> torch.Tensor:
        """Local gradients of the local agents at their rows X (minibatch when batch_size)."""
        if batch_size is None:
            return self.problem.grad(X, self.agents)
        return self.problem.stochastic_grad(X, self.rng, k, batch_size, self.agents, purpose)

    def noise(self, noise: Noise, purpose: str, k: int) -> torch.Tensor:
        """This iteration's draw of ``noise`` for the local agents, ``(n_local, d)``."""
        return noise.sample(self.rng, purpose, k, self.agents, self.n, self.dim, self.net.dtype,
                            device=self.net.device)

    def perturb(self, value: torch.Tensor, noise: Noise, purpose: str, k: int,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """``value + noise`` for the local agents' rows (``rows``: those local rows only, in
        this order; ``value`` has one row each): the release of a noisy value.

        With reproducible randomness this is ``value + self.noise(noise, purpose, k)``. With
        secret randomness the release lies on a power-of-two lattice below the noise scale
        (:mod:`dpnet.lattice`), so that its floating-point output does not depend on the value's
        low bits: Laplace noise as an exact discrete Laplace, the rounding's pure-DP slack added
        to :attr:`lattice_slack` (the runner charges it to the guarantee); Gaussian noise by
        :meth:`add_gaussian` (``docs/deploying.md``)."""
        if self.rng.kind != "secret" or noise.is_zero or type(noise) not in (Laplace, Gaussian):
            draw = self.noise(noise, purpose, k)
            return value + (draw if rows is None else draw[rows])
        local = np.arange(len(self.agents)) if rows is None else rows.cpu().numpy()
        agents = self.agents[local]
        scale = noise.scale_at(k, self.n)[agents]
        if type(noise) is Gaussian:
            draw = noise.sample(self.rng, purpose, k, agents, self.n, self.dim)  # float64, CPU
            return self.add_gaussian(value, draw, scale, k)
        noisy = scale > 0                     # a row without noise is released as it is
        out = value.detach().to("cpu", torch.float64).numpy().copy()
        secret = cast("SecretStreams", self.rng)         # kind "secret" above
        out[noisy], slack = lattice.perturb(out[noisy], scale[noisy], secret.words())
        self.lattice_slack += slack
        return torch.from_numpy(out).to(value.device, value.dtype)

    def add_gaussian(self, value: torch.Tensor, draw: torch.Tensor, scale: np.ndarray,
                     k: int) -> torch.Tensor:
        """``value + draw``, ``draw`` a Gaussian of per-row standard deviation ``scale`` that
        the account of iteration ``k``'s release assumes: with secret randomness and a known
        :attr:`lattice_floor`, rounded to the lattice of ``scale`` with the noise raised by
        ``1 + g sqrt(d) / floor`` to pay for the rounding (:func:`dpnet.lattice.perturb_gaussian`,
        largest raise in :attr:`lattice_bump`); otherwise in floating point (secret mode sets
        :attr:`float_gaussian`, and the guarantee says so)."""
        floor = (None if self.lattice_floor is None or k >= len(self.lattice_floor)
                 else float(self.lattice_floor[k]))
        if self.rng.kind != "secret" or floor is None:
            self.float_gaussian |= self.rng.kind == "secret"
            return value + draw.to(value.device, value.dtype)
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
        noisy = scale > 0
        out = value.detach().to("cpu", torch.float64).numpy().copy()
        z = draw.detach().to("cpu", torch.float64).numpy()
        out[noisy], bump = lattice.perturb_gaussian(out[noisy], z[noisy], scale[noisy],
                                                    floor)
        out[~noisy] += z[~noisy]
        self.lattice_bump = max(self.lattice_bump, bump)
        return torch.from_numpy(out).to(value.device, value.dtype)


class Algorithm(ABC):
    """Base class of every dpnet algorithm (see the module docstring)."""

    name: ClassVar[str] = "algorithm"
    paper: ClassVar[str] = ""
    private: ClassVar[bool] = False
    #: whether the algorithm's theorems allow a time-varying W (a
    #: :class:`~dpnet.graphs.schedule.GraphSchedule`): each W_k doubly stochastic, the union
    #: over rounds connected; the runner refuses a schedule otherwise
    time_varying_graphs: ClassVar[bool] = False
    #: whether every step releases by one mechanism repeated (constant noise, sensitivity and
    #: sampling), so that R releases are accounted as a run of R steps (a resumed secret run that
    #: sent some iterations twice: :func:`dpnet.runner.charge_repeated_releases`)
    identical_steps: ClassVar[bool] = False
    #: whether two agents draw a shared secret (keyed by their edge): across processes with
    #: secret randomness they would need a key agreed between them (dpnet.distributed refuses)
    pairwise_secrets: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every constructor is followed by :meth:`_check_noise_arguments`, so a wrong noise
        argument fails where it is written, not iterations later inside a run."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return

        @functools.wraps(init)
        def checked(self, *args: Any, **kw: Any) -> None:
            init(self, *args, **kw)
            if type(self).__init__ is checked:      # the outermost constructor checks once
                self._check_noise_arguments(init)

        cls.__init__ = checked  # type: ignore[method-assign]  # the constructor is wrapped on purpose

    def _check_noise_arguments(self, init) -> None:
        """A constructor parameter annotated as a Noise holds one after construction."""
        for pname, param in inspect.signature(init).parameters.items():
            if "Noise" in str(param.annotation) and hasattr(self, pname):
                value = getattr(self, pname)
                if not isinstance(value, Noise):
                    raise ParameterError(pname, value, "a noise object from dpnet.noise, e.g. "
                                         "Laplace(scale, decay=q) or Gaussian(scale)")

    @abstractmethod
    def init(self, ctx: Context, x0: torch.Tensor) -> State:
        """Initial state from the local rows of x0."""

    @abstractmethod
    def step(self, ctx: Context, state: State, k: int) -> State:
        """Iteration k -> k+1."""

    def iterate(self, state: State) -> torch.Tensor:
        """The ``(n_local, d)`` iterates that metrics, callbacks and the result report: ``state["x"]`` by
        default; an algorithm whose guarantees are about another state variable (DP-DDA's running average)
        overrides it."""
        return state["x"]

    def records_per_step(self, problem: Problem) -> float | None:
        """Expected records one agent's step reads from its local set: the minibatch
        hyper-parameter when the algorithm has one set (``batch_size``, or ``batch`` where its
        paper names it so), else None, a full local gradient. :func:`dpnet.run`'s ``"auto"`` log
        cadence compares it with what a metrics row reads."""
        for attr in ("batch_size", "batch"):
            value = getattr(self, attr, None)
            if value is not None:
                return float(value)
        return None

    # -- what is published (ranked by dpnet compare) ------------------------------------------
    #: the model the algorithm publishes at the end, as a function of what its guarantee
    #: covers: ``("state", key)``, the final value of a state variable that is a post-processing
    #: of the charged releases or of the messages; ``("message", name)``, each agent's last
    #: broadcast of message ``name`` (the run must keep its transcript, ``record=True``). None:
    #: not declared (a non-private algorithm publishes its iterate).
    released: ClassVar[tuple[str, str] | None] = None

    def released_model(self, result) -> np.ndarray:
        """``(n, d)``: each agent's published model of a finished run (see :attr:`released`)."""
        if self.released is None:
            require(not getattr(self, "private", False), "released", None, f"a declared "
                    f"released model for the private algorithm {self.name}")
            return np.asarray(result.x)
        kind, name = self.released
        if kind == "state":
            return np.asarray(result.state[name])
        require(result.transcript is not None, "record", False, f"record=True: {self.name} "
                f"publishes each agent's last broadcast of {name!r}, read from the transcript")
        sent = result.transcript.stacked(name, result.x.shape[0])           # (T, n, d), NaN: silent
        spoke = ~np.isnan(sent[:, :, 0])
        require(bool(spoke.any(axis=0).all()), "transcript", name, "a broadcast of every agent")
        last = sent.shape[0] - 1 - np.argmax(spoke[::-1], axis=0)
        return sent[last, np.arange(sent.shape[1])]

    def check_graph(self, graph: Graph) -> None:
        """Raise if the graph does not meet the algorithm's requirement (default: none)."""

    def check_problem(self, problem: Problem) -> None:
        """Raise if the problem does not meet the algorithm's requirement (default: none)."""

    # -- privacy (one API for every algorithm: dpnet.privacy.accountants) ---------------------
    #: the accountant ``privacy()`` uses when none is named (None: the algorithm is not private)
    default_accountant: str | None = None
    #: attributes a calibration scales by one common factor (noise objects or numeric scales)
    noise_attributes: ClassVar[tuple[str, ...]] = ()

    def lattice_floor(self, problem: Problem, graph: Graph, iterations: int,
                      assumptions: Assumptions) -> np.ndarray | None:
        """``(iterations,)``: for each iteration k, a positive lower bound on the l2 sensitivity
        that every accountant of this algorithm assumes for a Gaussian release of iteration k
        (``inf`` where none depends on the data), under ``assumptions``. A secret run rounds its
        Gaussian releases to a lattice and raises their noise by ``1 + g sqrt(d) / floor`` to pay
        for it (:meth:`Context.add_gaussian`); None: not known, they stay floating point.

        By default, from :meth:`mechanism`, which the generic accountants read: half the smallest
        positive sensitivity of the iteration's Gaussian releases (half: a Poisson replace-one
        release's per-record bound). An algorithm whose own accountant assumes a smaller
        sensitivity than its mechanism states, or that has no mechanism, overrides this."""
        if not accountants.describes_mechanism(self):
            return None
        floors = np.full(iterations, np.inf)
        for _, mech in self.mechanism(problem, graph, iterations,  # type: ignore[attr-defined]
                                      assumptions):
            for r in mech.releases:
                if r.noise != "gaussian":
                    continue
                if len(r) != iterations:     # not one release per iteration: no index by k
                    return None
                floors = np.minimum(floors, np.where(r.sensitivity > 0, r.sensitivity / 2,
                                                     np.inf))
        return floors

    def privacy(self, problem: Problem, graph: Graph, iterations: int | None = None,
                assumptions: Assumptions | dict | None = None, accountant: str | None = None,
                **constants: Any) -> PrivacyGuarantee:
        """The guarantee these parameters buy, by ``accountant`` (default
        :attr:`default_accountant`; ``dpnet list accountants``). ``constants``: assumption values
        (:data:`dpnet.privacy.assumptions.ASSUMPTIONS`) and the accountant's own options; any
        other name is an error listing the known ones."""
        return accountants.account(self, problem, graph, iterations, assumptions, accountant,
                                   **constants)

    def calibrate(self, epsilon: float, problem: Problem, graph: Graph,
                  iterations: int | None = None, over: str | tuple[str, ...] | None = None,
                  accountant: str | None = None, assumptions: Assumptions | dict | None = None,
                  **constants: Any) -> Self:
        """A copy whose ``over`` attributes (default :attr:`noise_attributes`) are scaled by the
        smallest common factor whose guarantee, by ``accountant``, is at most ``epsilon``
        (:func:`dpnet.privacy.calibration.calibrate`: never above the target). Give ``delta``
        (an assumption) for an (epsilon, delta) accountant."""
        require(isinstance(epsilon, int | float) and not isinstance(epsilon, bool)
                and 0 < epsilon < math.inf, "epsilon", epsilon, "a target 0 < epsilon < inf")
        names = (over,) if isinstance(over, str) else tuple(over or self.noise_attributes)
        require(bool(names), "over", over, f"attributes of {self.name} to scale (it has no "
                "noise_attributes)")
        for a in names:
            require(hasattr(self, a), "over", a, f"an attribute of {self.name}")
        values = [getattr(self, a) for a in names]
        if all((v.is_zero if isinstance(v, Noise) else v == 0) for v in values):
            raise ParameterError(", ".join(names), "scale 0", "some noise scale > 0 to calibrate "
                                 "(scaling zero noise gives none)")

        refused: list[ParameterError] = []

        def epsilon_of(t: float) -> float:
            # a theorem whose hypotheses fail at this trial scale (too little noise for
            # epsilon <= 1, say) certifies nothing there: infeasible, search on
            try:
                return self.noise_scaled(t, names).privacy(
                    problem, graph, iterations, assumptions=assumptions, accountant=accountant,
                    **constants).epsilon
            except ParameterError as err:
                refused.append(err)
                return math.inf

        try:
            return self.noise_scaled(calibrate(epsilon_of, epsilon), names)
        except ParameterError:
            if refused:   # nothing feasible: the accountant's own reason is the informative one
                raise refused[-1] from None
            raise

    def noise_scaled(self, factor: float, over: tuple[str, ...] | None = None) -> Self:
        """A copy whose ``over`` attributes (default :attr:`noise_attributes`: noise objects or
        plain scales) are multiplied by ``factor``: what :meth:`calibrate` returns."""
        out = copy.copy(self)
        for a in over or self.noise_attributes:
            value = getattr(self, a)
            setattr(out, a, value.scaled(factor) if isinstance(value, Noise) else value * factor)
        return out

    def params(self) -> dict[str, Any]:
        """Hyper-parameters for reports."""
        return {k: (repr(v) if not isinstance(v, int | float | str | bool | type(None)) else v)
                for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class BoxConstrained:
    """Mixin of the algorithms whose iterates live in the box ``X = [-radius, radius]^d``
    (``radius=None``: ``X = R^d``). The Euclidean projection onto a box is a coordinate-wise
    clamp, so it acts on the stacked ``(n, d)`` rows as on one agent's vector."""

    radius: float | None = None

    def _project(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.radius is None else x.clamp(-self.radius, self.radius)

    def init(self, ctx: Context, x0: torch.Tensor) -> State:
        """``x_0`` projected onto X."""
        return {"x": self._project(x0)}


#: every algorithm by its ``name`` (``dpnet list algorithms``)
REGISTRY: Registry[type[Algorithm]] = Registry("algorithm", "dpnet.algorithms")

_register = REGISTRY.decorator(lambda cls: cls.name)


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: make ``cls`` available as ``dpnet.algorithms.get(cls.name)`` (and by
    name in configurations, ``dpnet run``, ``dpnet privacy`` and the leaderboard's entries).

    An algorithm's module docstring states its update in the paper's notation; a class without a
    docstring of its own gets it, so that ``help(cls)`` and an IDE show the equations."""
    if not cls.__dict__.get("__doc__"):
        cls.__doc__ = getattr(sys.modules.get(cls.__module__), "__doc__", None)
    return _register(cls)


def get(name: str) -> type[Algorithm]:
    """The algorithm class called ``name`` (case and ``-``/``_`` do not matter), or a user's
    class by import path ``"package.module:Class"`` (an :class:`Algorithm` subclass)."""
    if isinstance(name, str) and ":" in name:
        cls = resolve(name, "algorithm")
        require(isinstance(cls, type) and issubclass(cls, Algorithm), "algorithm", name,
                "an import path to an Algorithm subclass")
        return cls
    key = name.lower().replace("-", "_") if isinstance(name, str) else name
    if key not in REGISTRY:
        raise UnknownNameError("algorithm", str(name), REGISTRY)
    return REGISTRY[key]


def available() -> dict[str, type[Algorithm]]:
    """Every registered algorithm class by its name, sorted by name (``dpnet list algorithms``)."""
    return dict(sorted(REGISTRY.items()))


def noise_parameters(cls: type[Algorithm]) -> frozenset[str]:
    """The constructor parameters of ``cls`` that take a :class:`~dpnet.noise.Noise` (their
    annotation names one), which a configuration may give as a noise table or a Laplace scale.
    A number like DP-SGD's ``noise_multiplier`` or DOLA's ``noise_scale`` is not one: the
    parameter's name does not decide."""
    return frozenset(p.name for p in inspect.signature(cls.__init__).parameters.values()
                     if "Noise" in str(p.annotation))
