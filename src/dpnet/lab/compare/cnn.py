"""The MNIST CNN task of ``dpnet compare``, and which private algorithms apply to it.

**Task** ``mnist_cnn``: paper 001's image problem (:func:`dpnet.lab.source.cnn_problem`:
the three-convolution :class:`~dpnet.models.MnistCNN`, 7,194 parameters, no BatchNorm,
cross-entropy) over :data:`N_AGENTS` = 10 agents on the circulant graph with offsets (1, 2)
(Metropolis weights, as the other undirected tasks). The MNIST training set (60,000 images)
first loses 1/6 of its images (10,000, a seeded draw: :func:`dpnet.lab.source.held_out_images`)
to the validation split that tuning reads, held by the benchmark and no agent's data, so reading
it without noise is outside every agent's privacy unit (before 2026-11-27 it was the last 1,000
of each agent's own 6,000 images, issue 41); the other 50,000 are split evenly over the agents
(``cnn_problem``'s split, seed 0: ``m`` = 5,000 records each). The reported numbers are on the
MNIST test set (10,000 images). The start ``x0`` is the CNN's seeded initial parameters (seed 0;
public, shared by every agent and run). Metrics of the agents' average ``xbar_K``: the ranked
``utility`` is the test error ``1 - accuracy`` (lower is better), ``heldout_loss`` the
cross-entropy on the split, ``accuracy`` the accuracy.

**Relation**: one record (image, label) of one agent's local dataset replaced by any other
record, as in every task. Unlike the logistic tasks no feature-norm bound bounds a record's
gradient: a CNN's per-record gradient is unbounded, so the local-gradient sensitivity is infinite
(``R = inf``, :attr:`~dpnet.lab.compare.tasks.Task.sensitivity` = inf). Only an algorithm that clips
each record's gradient has a finite sensitivity here.

**Algorithms** (the mapping of each theorem onto the relation):

* DO-ADP (paper 001): the shared ``doadp`` entry's mapping and build apply unchanged: its relation
  is this record relation; each per-sample gradient is clipped in l2 at ``G = 1`` (the usual
  DP-SGD bound; the CNN has no BatchNorm, so per-sample gradients exist), so the minibatch mean of
  ``B = 16`` moves by at most ``2G/B`` in l2 when one record is replaced, whatever the network,
  and each record is used with probability ``B/m`` per step; the accountants read ``G``
  (default ``proof`` at delta = 1e-5, delta0 = 1e-8; tightest ``pld``). Only its step grid is
  the CNN's own (:data:`CNN_GRID`, the entry's grid for this task): the shared one
  (alpha 0.1, 0.3) leaves the CNN at chance under the default accountant's noise (measured at
  K = 300, beta = 0.5: 10-14 % test accuracy at epsilon 0.5 and 4), because that noise has
  ``sigma sqrt(d)`` = 24-58 in norm per agent and step against a clipped gradient of norm <= 1.
  A user tuning a private CNN tries a log grid of learning rates: alpha in 0.01, 0.03, 0.1, 0.3
  with momentum beta = 0.5 (the four trials; the quick compare runs the first two). Measured
  (K = 300, seed 100, test accuracy): noise-free 83 / 93 / 96 % at alpha 0.1 / 0.3 / 1.0; at
  the proof accountant's epsilon = 4 noise 34 / 51 / 12 % at alpha 0.01 / 0.03 / 0.1; at PLD's
  epsilon = 4 noise 42 / 63 / 80 / 78 % at alpha 0.01 / 0.03 / 0.1 / 0.3.
* DiaDSP, PGTC, PPDC (paper 000) and DPP2 (paper 004) add Laplace noise scaled to a bound ``M``
  on every local gradient (DPP2: an adjacency radius ``delta = 2M``); with the sensitivity
  infinite there is no finite ``M`` and none of them clips: **not applicable** here
  (:data:`UNBOUNDED`, through the task's ``exclude``: their entries, and other tasks, are
  untouched).
* DP-DDA (paper 001's baseline): its privacy needs no constraint radius (clipping bounds a
  record's contribution; its accountants read only ``G, B, m, p, T, sigma``, and
  ``radius=None`` runs on ``R^d``), so the radius is no obstacle on the CNN. But its iterate
  ``x_{t+1} = -z_{t+1}/beta_{t+1}`` is centred at the prox centre 0, not at ``x0``: the CNN's
  weights collapse to near 0 and it stays at chance **even noise-free** (11.35 % test accuracy,
  the majority class, at K = 300 for beta0 in 0.3, 1, 3): left out of this task with that reason
  (:data:`DPDDA_NOTE`), not run at every epsilon for a chance-level row.
* Paper 003's ``directed_dpgt`` (S2) and ``directed_dpgt_s1`` (S1), registered by
  :mod:`.directed`: they need a digraph pair and full local gradients under a gradient bound
  (their sensitivity ``C = Delta = 2R/m`` is infinite here, and their drift argument needs the
  convex loss); their entries say not applicable.
* The online and box-constrained baselines of :mod:`.online` need the logistic loss's bounds:
  their entries say not applicable.

**Horizon and cost**: DO-ADP runs K = :data:`HORIZON` = 300 iterations at batch 16 per agent
(48,000 per-sample gradients per run, a little under one epoch of the 50,000 training records;
12-16 s per calibrated run on one core). DP-SGD and its anchors run at a practitioner's length: 6
epochs, K = 6 m / B (118 steps at B = 256, 59 at B = 512), 300,000 per-sample gradients per run,
about 220 s on one core of this 2-core machine (measured at B = 256: 6 epochs at lr = 2 reach
93.9 % test accuracy at epsilon 2 on seed 100, lr = 1 87.99 %). The task therefore searches one
horizon (:data:`HORIZONS`: the grid's own K, no shorter fraction): the four configurations of
each grid, the same budget for every method, and its batch sets K where the method runs by
epochs. Quick: at most :data:`QUICK_HORIZON` = 40 steps.

**Noise-free reference** (:func:`_reference`): the shared one (full-gradient gradient tracking
from x0) would cost a pass over all 50,000 records per iteration (about 14 s on one core: an hour
per step size at K = 300) and is another method class. Here it is the non-private counterpart
of the benchmarked method at the same horizon and batch: decentralized momentum SGD (paper 001's
eq. (2), :class:`~dpnet.algorithms.MomentumDSGD`: DO-ADP without clipping and noise, p = 1,
k = d), gamma = 0.5, over the same grid, chosen on the validation split, run through the
experiment engine's cache.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ... import graphs
from ...algorithms.doadp import MomentumDSGD
from ...errors import DPNetError
from ...runner import run
from .. import source
from ..store import Run, execute
from . import entries, tasks
from .entries import DOADP_BATCH
from .tasks import build

TASK = "mnist_cnn"
N_AGENTS = 10
#: 1/HELD_OUT of the training file is held out of every agent's share: the validation split
HELD_OUT = 6
HORIZON = 300
QUICK_HORIZON = 40
#: training samples the runner's per-log metrics read (a fixed subset: two logs per run)
METRIC_SAMPLES = 256
#: DO-ADP's trials on this task (momentum beta = 0.5, the shared entry's other value)
CNN_GRID = entries.DOADP_CNN_GRID
#: the search's horizons on this task: one (a shorter fraction of 6 epochs is not what a
#: practitioner tunes, and a second horizon doubles two CPU hours)
HORIZONS = (1.0,)
#: the reference's consensus step (DO-ADP's gamma in the shared entry)
REFERENCE_GAMMA = 0.5

LAPLACE_FULL_GRADIENT = ("diadsp", "pgtc", "ppdc", "dpp2")
UNBOUNDED = ("its Laplace noise is scaled to a bound M on every local gradient, and a CNN's "
             "per-record gradient is unbounded (no feature-norm bound makes it bounded: the "
             "local-gradient sensitivity is infinite); it does not clip")
DPDDA_NOTE = ("its privacy needs no radius (clipping at G bounds a record; radius=None runs on "
              "R^d), but its iterate -z/beta_t is centred at the prox centre 0, not x0: the "
              "CNN's weights collapse to ~0 and it stays at chance even noise-free (11.35 % "
              "test accuracy at K = 300 for beta0 = 0.3, 1, 3)")


def _exclude(name: str) -> str | None:
    """This task's reasons, before each entry's own check."""
    if name in LAPLACE_FULL_GRADIENT:
        return UNBOUNDED
    if name == "dp_dda":
        return DPDDA_NOTE
    return None


def reference_run(alpha: float, beta: float, iterations: int, code: str) -> dict:
    """One noise-free, unclipped momentum-DSGD run of the task (an engine run: cached; ``code``,
    :func:`~.entries.run_code` of the task, keys it by the task's builder and data root)."""
    t = build(TASK)      # names, not modules: a module would put its prose in the run's key
    p = t.problem
    alg = MomentumDSGD(alpha, REFERENCE_GAMMA, beta, batch_size=min(
        DOADP_BATCH, t.m))
    try:
        res = run(alg, p, t.graph, iterations, x0=t.x0, seed=0, log_every=iterations,
                  reference=None)
    except DPNetError as err:       # unclipped, a large step can diverge: not a candidate
        return {"status": f"diverged: {err}"}
    xbar = res.x.mean(axis=0)
    return {"status": "ok", **{f"{split}_{k}": v for split in ("val", "test")
                               for k, v in t.utility(xbar, split).items()}}


def _reference(K: int) -> dict:
    runs = [Run(reference_run, dict(alpha=g["alpha"], beta=g["beta"], iterations=K,
                                    code=entries.run_code(TASK))) for g in CNN_GRID]
    ok = [(g, r) for g, r in zip(CNN_GRID, execute(runs).rows) if r["status"] == "ok"]
    if not ok:
        return {"method": "momentum DSGD (every step size diverged)", "eta": math.nan,
                "noise_free": math.nan, "accuracy": math.nan}
    g, r = min(ok, key=lambda gr: gr[1]["val_heldout_loss"])
    batch = min(entries.DOADP_BATCH, tasks.build(TASK).m)
    return {"method": f"momentum DSGD (no clipping, batch {batch}, "
                      f"alpha = {g['alpha']:g}, beta = {g['beta']:g}, chosen on validation)",
            "eta": g["alpha"], "noise_free": r["test_utility"], "accuracy": r["test_accuracy"]}


def _cnn(spec: tasks.TaskSpec, dataset: str | None) -> tasks.Task:
    """MNIST only (``dataset`` is the LIBSVM tasks' choice and is ignored here)."""
    train, test = source.images("mnist")
    held = len(train.y) // HELD_OUT
    problem = source.cnn_problem("mnist", spec.n_agents, held_out=held,
                                 eval_samples=METRIC_SAMPLES)
    m = problem.m
    assert m is not None            # cnn_problem splits evenly: equal local sizes
    val = source.held_out_images(len(train.y), held)
    evals = {"val": (train.X[val], train.y[val]), "test": (test.X, test.y)}

    def score(xbar: np.ndarray, split: str) -> dict[str, float]:
        r = problem.evaluate_model(torch.as_tensor(xbar)[None], evals[split])
        acc = float(r["accuracy"][0])
        return {"utility": 1.0 - acc, "heldout_loss": float(r["loss"][0]), "accuracy": acc}

    notes = (f"{m} training records per agent, {len(val)} validation images (held out of the "
             f"training file before the agents' split: no agent's data), {len(test.y)} test "
             "images",
             "relation: one record replaced by any record; a CNN's per-record gradient has no "
             "bound (R = inf): only algorithms that clip have a finite sensitivity",
             f"start x0: the CNN's seeded initial parameters (seed 0, {problem.dim} values)")
    return tasks.Task(spec, problem, graphs.circulant(spec.n_agents, offsets=(1, 2)), m,
                      math.inf, score, problem.x0.numpy(), notes, _exclude, _reference)


SPEC = tasks.register(tasks.TaskSpec(
    TASK, f"MNIST CNN (paper 001's three-convolution model, 7,194 parameters), {N_AGENTS} "
    "agents, circulant graph (offsets 1, 2); 1/6 of the training set held out for validation "
    "(no agent's data), the rest split evenly (5,000 records each), the MNIST test set for the "
    f"reported numbers; DO-ADP K = {HORIZON} at batch 16 per agent, DP-SGD 6 epochs at batch 256 or 512",
    "test error 1 - accuracy", HORIZON, QUICK_HORIZON, _cnn, n_agents=N_AGENTS, dataset="mnist",
    horizons=HORIZONS,
    relation="one record (image, label) of one agent's local dataset replaced by any record; a "
             "CNN's per-record gradient is unbounded, so only an algorithm that clips each "
             "record's gradient (at G) has a finite sensitivity (2G/B on a minibatch of B)"))
