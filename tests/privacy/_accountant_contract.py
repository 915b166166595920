"""The contract every accountant of every algorithm honours (as dp_accounting tests each of its
accountants against one contract): subclass :class:`AccountantContract` with ``setups``, the
``setup`` and ``accountant`` names, and whatever differs (horizon, calibration targets)."""

import math

import numpy as np
import pytest

from dpnet.errors import ParameterError, UnknownNameError
from dpnet.privacy import accountants
from dpnet.privacy.assumptions import ASSUMPTIONS

GRADIENT_BOUNDS = {"gradient_bound", "l1_gradient_bound"}
#: accountants that report (epsilon, delta): their delta is given, never assumed
APPROXIMATE = {"rdp", "pld", "kang"}


class AccountantContract:
    """A guarantee that is positive, falls with the noise and grows with the horizon, refuses a
    misspelled constant by name (listing the assumptions and the accountant's options), and a
    calibration that never overshoots (random targets, log-uniform in ``targets``)."""

    #: name -> (maker(noise factor) -> algorithm, problem, graph, constants)
    setups: dict = {}
    setup = ""
    accountant = ""
    K = 12
    targets = (0.5, 200.0)
    n_targets = 6
    horizon_grows = True          # False: an account that does not depend on the horizon
    exact_calibration = True      # False: an integer noise parameter (a quantizer's trials)
    seed = 7

    def make(self, factor=1.0):
        return self.setups[self.setup][0](factor)

    @property
    def problem(self):
        return self.setups[self.setup][1]

    @property
    def graph(self):
        return self.setups[self.setup][2]

    def call(self, alg, method, *args, K=None, **kw):
        constants = dict(self.setups[self.setup][3])
        if GRADIENT_BOUNDS & set(kw):    # the caller chooses which bound: drop the default one
            constants = {k: v for k, v in constants.items() if k not in GRADIENT_BOUNDS}
        if self.accountant in APPROXIMATE:
            constants.setdefault("delta", 1e-5)
        return getattr(alg, method)(*args, self.problem, self.graph, self.K if K is None else K,
                                    accountant=self.accountant, **{**constants, **kw})

    def eps(self, alg, K=None, **kw):
        return self.call(alg, "privacy", K=K, **kw).epsilon

    def test_positive_and_monotone(self):
        e = self.eps(self.make())
        assert 0 < e < math.inf
        assert self.eps(self.make(2.0)) < e                # more noise, less epsilon
        longer = self.eps(self.make(), K=self.K + 5)
        assert longer > e if self.horizon_grows else longer == e

    def test_the_pure_flag_is_what_the_guarantee_reports(self):
        """A pure accountant reports delta = 0 (and refuses a delta, which it would not use);
        an (epsilon, delta) one reports the delta it was given or derived."""
        alg = self.make()
        g = self.call(alg, "privacy")
        pure = accountants.is_pure(self.accountant)
        assert (g.delta == 0) == pure
        if pure:
            with pytest.raises(ParameterError, match="no delta"):
                self.call(alg, "privacy", delta=1e-5)

    def test_misspelled_constant_is_named_and_the_known_ones_listed(self):
        alg = self.make()
        with pytest.raises(UnknownNameError) as err:
            self.call(alg, "privacy", gradient_bnd=1.0)
        assert "gradient_bnd" in str(err.value)
        assert all(name in str(err.value) for name in ASSUMPTIONS)
        options = accountants.available(alg)[self.accountant].options
        assert all(name in str(err.value) for name in options)

    def test_calibration_never_overshoots(self):
        lo, hi = self.targets
        targets = np.exp(np.random.default_rng(self.seed).uniform(np.log(lo), np.log(hi),
                                                                  self.n_targets))
        for target in targets:
            tuned = self.call(self.make(), "calibrate", target)
            assert type(tuned) is type(self.make())
            e = self.eps(tuned)
            assert e <= target
            if self.exact_calibration:
                assert e == pytest.approx(target, rel=1e-6)
