"""DMOD: differentially private distributed online mirror descent (Yuan, Lei & Hong, 2023), a
baseline of paper 002.

Per agent i, with a doubly stochastic A (``graph.W``) and Laplace noise on the broadcast state:

    z_t^i     = sum_j a_ij (x_t^j + eta_t^j)                                (received, own included)
    x_{t+1}^i = argmin_{x in X} { alpha_{t+1} <grad f_t^i(x_t^i), x> + D_psi(x, z_t^i) }

i.e. online mirror descent from the mixed point with the gradient taken at the agent's own
decision x_t^i (the loss of round t is revealed after x_t^i is played). With the Euclidean mirror
map ``psi = ||.||^2 / 2`` (the one implemented; it is 1-strongly convex, so the sensitivity is
the same as DOLA's) this is ``x_{t+1}^i = Pi_X[z_t^i - alpha_{t+1} grad f_t^i(x_t^i)]``. Step
``alpha_k = alpha0/k^p`` and noise ``Lap(mu_k)``, ``mu_k = 2 alpha_k sqrt(n) L / eps``: the same
decay for step size and noise, as paper 002 notes for DOLA and DMOD.

Gaps (documented, ``[MISSING]``): only the abstract of the original could be consulted while
writing this; the update above (gradient point, noisy own broadcast in the mix, Euclidean psi, box
X of half-width ``radius``) and the per-iteration accounting are reconstructions consistent with
paper 002's description ("equal decay rates for step size and noise") and with DOLA's analysis.
"""

from __future__ import annotations

from ..privacy import accountants
from .base import register
from .dola import DOLA, own_accountant


@register
class DMOD(DOLA):
    name = "dmod"
    paper = "Yuan, Lei & Hong (2023), DP distributed online mirror descent (Euclidean mirror map)"
    reference = "Yuan, Lei & Hong (2023), per-iteration Laplace mechanism"
    default_accountant = "yuan"

    def _gradient_point(self, w, b):
        return w                                               # DMOD: at the own decision x_t^i


accountants.register(DMOD, "yuan", "DMOD's own budget (Yuan, Lei & Hong 2023): DOLA's Laplace "
                     "argument, variant 'published' or 'all-data'", pure=True)(own_accountant)
