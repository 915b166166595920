"""Decentralized (stochastic) gradient descent, noise-free.

DGD (Nedic & Ozdaglar 2009) and DSGD (Pu, Olshevsky & Paschalidis; Lian et al. 2017):

    x_{i,k+1} = sum_j w_ij x_{j,k} - eta_k g_{i,k}

with ``g_{i,k} = grad f_i(x_{i,k})`` (DGD) or a minibatch gradient of ``batch_size`` local samples
(DSGD), and ``eta_k = eta / (k+1)^power`` (``power = 0``: constant step).
"""

from __future__ import annotations

from ..errors import nonnegative, positive, positive_int
from .base import Algorithm, Context, State, register


@register
class DGD(Algorithm):
    name = "dgd"
    paper = "Nedic & Ozdaglar (2009), combine-then-adapt form"
    # Nedic & Olshevsky (2015) and Koloskova et al. (2020): any doubly stochastic W_k whose
    # union over a window is connected
    time_varying_graphs = True

    def __init__(self, eta: float, power: float = 0.0, batch_size: int | None = None) -> None:
        self.eta = positive("eta", eta)
        self.power = nonnegative("power", power)
        self.batch_size = None if batch_size is None else positive_int("batch_size", batch_size)

    def check_graph(self, graph):
        graph.require_mixing(self.name)

    def step_size(self, k: int) -> float:
        """The step ``eta_k = eta / (k+1)^power`` of iteration k."""
        return self.eta / (k + 1.0) ** self.power

    def init(self, ctx: Context, x0) -> State:
        return {"x": x0}

    def step(self, ctx: Context, state: State, k: int) -> State:
        x = state["x"]
        mixed = ctx.net.mix(ctx.net.exchange(x, "x"))
        return {"x": mixed - self.step_size(k) * ctx.grad(x, self.batch_size, k)}


@register
class DSGD(DGD):
    """DGD with minibatch gradients (``batch_size`` local samples per iteration)."""

    name = "dsgd"
    paper = "Pu, Olshevsky & Paschalidis (2021); Lian et al. (2017)"

    def __init__(self, eta: float, batch_size: int = 1, power: float = 0.0) -> None:
        super().__init__(eta, power, batch_size)
