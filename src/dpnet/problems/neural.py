"""Neural networks as stacked decentralized problems.

:class:`NeuralProblem` wraps any ``torch.nn.Module`` ``h(w; a)`` and a dataset partitioned over
agents: agent i holds the ``m_i`` samples ``parts[i]`` (local sizes may differ) and minimises
``f_i(w) = (1/m_i) sum_{j in parts[i]} loss(h(w; a_j), b_j)`` (cross-entropy by default); the
global objective is ``(1/n) sum_i f_i``, so with unequal sizes a record of agent i weighs
``1/(n m_i)`` in the training-union metrics. Its state
row is the module's parameters flattened in ``named_parameters()`` order, so the ``(n, P)`` state
of all agents is one float32 tensor, like any other problem's ``(n, d)``.

Gradients of all agents come from one ``torch.func`` call: ``vmap(grad(loss))`` over the agents'
parameter rows and minibatches, with ``functional_call`` evaluating the shared module at each
row. Per-sample gradients (for clipping, :class:`~dpnet.problems.stochastic.Clip`) nest a second
``vmap`` over the samples of each agent's minibatch. On a device (:meth:`Problem.to`) the module
is copied there with the data, so these calls run there; minibatch indices are drawn on the host
and moved. The module runs in eval mode (no dropout);
BatchNorm layers are switched to batch statistics
(``torch.func.replace_all_batch_norm_modules_``) and refused when per-sample gradients are
requested (a batch of one has no statistics).

Evaluation (:meth:`NeuralProblem.evaluate`) reports loss and accuracy on the training union and
on a test set, for the agents' average model and for every agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from ..errors import ParameterError, positive_int, require
from ..partitions import partition
from ..rng import Streams
from .base import Problem, moved
from .stochastic import Clip, LocalRecords, as_clip, padded_index_rows, sample_indices

Transform = Callable[[torch.Tensor], torch.Tensor]

#: training records the per-log metrics read by default: the standard error of a mean 0/1 loss on
#: 2,048 records is at most 1.1 percentage points, and one metrics row of the MNIST CNN costs about
#: 2 private steps (10 agents, batch 256) where the whole 20,000-record union cost 11
#: (``benchmarks/bench_metrics.py``)
DEFAULT_METRIC_SAMPLES = 2048

#: agents per vmap chunk on the CPU (see NeuralProblem._bind)
CPU_AGENT_CHUNK = 5


def _identity_float(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float32)


class FlatModule:
    """A module whose parameters are one flat row: ``unflatten`` maps a row to the parameter
    dict (views), ``logits(row, xb)`` evaluates the module with them (``functional_call``, the
    module's own buffers); ``x0`` is the module's initial row, ``dim`` its length P."""

    def __init__(self, module: nn.Module, dtype: torch.dtype) -> None:
        self.module = module
        params = dict(module.named_parameters())
        self.names = list(params)
        self.shapes = [p.shape for p in params.values()]
        self.sizes = [p.numel() for p in params.values()]
        self.dim = int(sum(self.sizes))
        self.buffers = dict(module.named_buffers())
        self.x0 = torch.cat([p.detach().reshape(-1) for p in params.values()]).to(dtype)
        self.device = self.x0.device

    def unflatten(self, X: torch.Tensor) -> dict[str, torch.Tensor]:
        """Parameter dict of one state row, or of every row of ``X`` (leading axes kept)."""
        out, o = {}, 0
        for name, shape, size in zip(self.names, self.shapes, self.sizes):
            out[name] = X[..., o:o + size].reshape(*X.shape[:-1], *shape)
            o += size
        return out

    def flatten(self, params: dict[str, torch.Tensor], lead: int) -> torch.Tensor:
        """Rows from a parameter dict whose entries have ``lead`` leading axes."""
        return torch.cat([params[n].reshape(*params[n].shape[:lead], -1) for n in self.names],
                         dim=-1)

    def logits(self, row: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        """The module's output on the inputs ``xb`` with the parameters of one flat ``row`` (``(P,)``);
        differentiable in ``row``."""
        return self.logits_of(self.unflatten(row), xb)

    def logits_of(self, params: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
        """The module's output on the inputs ``xb`` with the parameters ``params`` (a dict by parameter
        name, as :meth:`unflatten` gives) and the module's own buffers (``functional_call``)."""
        return functional_call(self.module, (params, self.buffers), (xb,))

    def in_float32(self, fn: Callable) -> Callable:
        """``fn`` with cuDNN held to IEEE float32 while it runs (forward and backward) on a CUDA
        device. PyTorch lets cuDNN convolutions use TF32 by default (``allow_tf32``), which keeps
        10 mantissa bits: on an H200 the vmap'd MNIST CNN's gradients then differed from float64
        by up to 3e-3 (the per-agent loop, whose kernels cuDNN picked otherwise, by 1e-5), so
        the same run gave other models on the GPU than on the CPU. Elsewhere ``fn`` is returned
        as is."""
        if self.device.type != "cuda":
            return fn

        def exact(*args):
            before = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False
            try:
                return fn(*args)
            finally:
                torch.backends.cudnn.allow_tf32 = before
        return exact


class NeuralProblem(LocalRecords, Problem):
    """A module and a partitioned dataset (see the module docstring).

    ``features``: ``(N, ...)`` raw inputs (uint8 images are fine; ``transform`` maps a batch with
    any leading shape to the module's float input, e.g. :func:`dpnet.models.mnist_transform`);
    ``labels``: ``(N,)`` class indices; ``parts``: the sample indices of each agent, a
    :class:`~dpnet.partitions.Partition`, index arrays of any lengths, or ``(n, m)`` (e.g.
    :func:`dpnet.data.split_even`); ``test``: optional ``(features, labels)``.
    ``chunk``: samples per agent per forward pass in full-gradient and evaluation passes.
    ``metric_samples``: :meth:`loss` and :meth:`global_grad` (the runner's per-log metrics) use a
    fixed, evenly spaced subset of that many training samples (default
    :data:`DEFAULT_METRIC_SAMPLES`; every agent's records are in it), an estimate cheap enough to
    log during training; ``None``: the whole training union (on 20,000 MNIST records a row as
    costly as about 11 private steps of the CNN at batch 256 per agent)."""

    name = "neural"
    supports_clip = True
    dtype = torch.float32

    def __init__(self, model: nn.Module, features, labels, parts, test=None,
                 transform: Transform | None = None, chunk: int = 256,
                 metric_samples: int | None = DEFAULT_METRIC_SAMPLES) -> None:
        self.model = model.eval()
        self._has_bn = any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        if self._has_bn:
            torch.func.replace_all_batch_norm_modules_(self.model)
        self.features = torch.as_tensor(np.asarray(features))
        self.labels = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
        require(self.features.shape[0] == self.labels.shape[0], "labels", tuple(self.labels.shape),
                f"one label per sample ({self.features.shape[0]})")
        rows = padded_index_rows(parts)
        require(int(rows[0].max()) < self.features.shape[0] and int(rows[0].min()) >= 0,
                "parts", "indices", f"indices in [0, {self.features.shape[0]})")
        self.parts = torch.from_numpy(rows[0])
        self.n_agents = self.parts.shape[0]
        self._set_sizes(rows[1], self.n_agents, self.parts.shape[1])
        self.transform = transform or _identity_float
        self.chunk = positive_int("chunk", chunk)
        self.metric_samples = None if metric_samples is None else positive_int(
            "metric_samples", metric_samples)
        self.test = None
        if test is not None:
            tx, ty = test
            self.test = (torch.as_tensor(np.asarray(tx)),
                         torch.as_tensor(np.asarray(ty), dtype=torch.int64))
        self._flat = FlatModule(self.model, self.dtype)
        self.dim, self.x0 = self._flat.dim, self._flat.x0
        if self._flat.device != self.device:   # a module built on a device brings the data there
            self.device = self._flat.device
            self.features, self.labels, self.parts, self.test = moved(
                (self.features, self.labels, self.parts, self.test), self.device)
        self._bind()

    def _bind(self) -> None:
        """The vmap'd gradient and logit functions. They close over this object's module, so a
        moved copy (:meth:`to`) binds its own.

        On the CPU the gradients are vmap'd over chunks of :data:`CPU_AGENT_CHUNK` agents: one
        call over 100 agents batches their convolutions into activations far larger than the
        caches and ran 1.6x slower than a loop over module copies (MNIST CNN, batch 32, one
        thread: 816 ms; chunks of 5: 503 ms, the loop 502 ms). A GPU takes all agents at once."""
        chunk = CPU_AGENT_CHUNK if self.device.type == "cpu" else None
        exact, flat = self._flat.in_float32, self._flat
        # gradients of the parameter dict, then one concatenation: differentiating the flat row
        # through its views costs 1.4x (MNIST CNN, 256 samples: 90 ms against 63 ms)
        batch = vmap(grad(self._loss_batch), in_dims=(0, 0, 0), chunk_size=chunk)
        weighted = vmap(grad(self._loss_weighted), in_dims=(0, 0, 0, 0), chunk_size=chunk)
        nested = vmap(vmap(grad(self._loss_one), in_dims=(None, 0, 0)), in_dims=(0, 0, 0),
                      chunk_size=chunk)
        one = vmap(grad(self._loss_one), in_dims=(None, 0, 0))
        self._batch_grad = exact(lambda X, xb, yb: flat.flatten(
            batch(flat.unflatten(X), xb, yb), 1))
        self._weighted_grad = exact(lambda X, xb, yb, wb: flat.flatten(
            weighted(flat.unflatten(X), xb, yb, wb), 1))
        self._sample_grad = exact(lambda X, xb, yb: flat.flatten(
            nested(flat.unflatten(X), xb, yb), 2))
        self._one_agent_sample_grad = exact(lambda row, xb, yb: flat.flatten(
            one(flat.unflatten(row), xb, yb), 1))
        self._agent_logits = exact(vmap(self._logits, in_dims=(0, 0)))
        self._shared_logits = exact(vmap(self._logits, in_dims=(0, None)))

    def _move(self, device: torch.device, copy: bool = False) -> None:
        """Data, test set and initial row move; the module is copied to ``device`` and the
        functions that evaluate it are rebuilt around the copy (functional_call then runs there:
        the state rows and the module's buffers are both on ``device``)."""
        super()._move(device, copy)
        self._flat = FlatModule(self.model, self.dtype)
        self._bind()

    # -- parameters <-> rows ----------------------------------------------------------------
    def unflatten(self, row: torch.Tensor) -> dict[str, torch.Tensor]:
        """Parameter dict of one state row (views into it)."""
        return self._flat.unflatten(row)

    def load_into(self, module: nn.Module, row: torch.Tensor) -> nn.Module:
        """Copy a state row into a module with the same architecture (for export)."""
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(self.unflatten(torch.as_tensor(row, dtype=self.dtype))[name])
        return module

    def _logits(self, row: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        return self._flat.logits(row, xb)

    def _loss_batch(self, params, xb, yb):
        return nn.functional.cross_entropy(self._flat.logits_of(params, xb), yb)

    def _loss_weighted(self, params, xb, yb, wb):
        return (nn.functional.cross_entropy(self._flat.logits_of(params, xb), yb,
                                            reduction="none") * wb).sum()

    def _loss_one(self, params, x, y):
        return nn.functional.cross_entropy(self._flat.logits_of(params, x[None]), y[None])

    # -- data -------------------------------------------------------------------------------
    def batch(self, idx: torch.Tensor, agents: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels of local samples ``idx`` (``(len(agents), B)`` local indices)."""
        rows = self.parts[self._index(self._slot(agents))].gather(1, self._index(idx))
        return self.transform(self.features[rows]), self.labels[rows]

    # -- Problem protocol -------------------------------------------------------------------
    def check_x(self, X, name: str = "x0") -> torch.Tensor:
        X = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        if X.ndim == 1:
            require(X.shape[0] == self.dim, name, tuple(X.shape), f"shape (P,) = ({self.dim},)")
            return X.reshape(1, -1).repeat(self.n_agents, 1)
        if tuple(X.shape) != (self.n_agents, self.dim):
            raise ParameterError(name, tuple(X.shape),
                                 f"shape (P,) or (n, P) = ({self.n_agents}, {self.dim})")
        require(bool(torch.isfinite(X).all()), name, "non-finite entries", "finite")
        return X.clone()

    def default_x0(self, seed: int = 0) -> torch.Tensor:
        """Every agent starts from the module's own initial parameters (paper 001's common x_0)."""
        return self.x0.reshape(1, -1).repeat(self.n_agents, 1)

    def stochastic_grad(self, X, rng: Streams, k, batch_size, agents=None, purpose="sample",
                        clip: Clip | float | None = None) -> torch.Tensor:
        """Minibatch gradients of the agents' rows X: ``batch_size`` distinct local samples per
        agent from its own stream; with ``clip`` every per-sample gradient is clipped first."""
        a = self._agents(agents)
        B = positive_int("batch_size", batch_size)
        idx = sample_indices(rng, k, a, self.sizes[a], B, purpose, device=self.device)
        xb, yb = self.batch(idx, a)
        X = X.to(self.dtype)
        clip = as_clip(clip)
        if clip is None:
            return self._batch_grad(X, xb, yb)
        require(not self._has_bn, "clip", clip, "a module without BatchNorm (per-sample gradients "
                "of a batch-statistics layer are undefined; use GroupNorm)")
        return clip.apply(self._sample_grad(X, xb, yb)).mean(dim=1)

    def per_sample_grads(self, X, idx: torch.Tensor, agents=None) -> torch.Tensor:
        """``(n, B, P)`` per-sample gradients of the local samples ``idx`` (unclipped)."""
        require(not self._has_bn, "model", "BatchNorm", "a module without BatchNorm (per-sample "
                "gradients of a batch-statistics layer are undefined; use GroupNorm)")
        a = self._agents(agents)
        xb, yb = self.batch(idx, a)
        return self._sample_grad(X.to(self.dtype), xb, yb)

    per_sample_grads_at = per_sample_grads

    def clipped_grad_sum(self, X, idx: torch.Tensor, weights: torch.Tensor, clip: Clip,
                         agents=None) -> torch.Tensor:
        """``sum_b weights[i, b] clip(grad l(x_i; record idx[i, b]))`` per agent
        (:func:`dpnet.problems.stochastic.clipped_grad_sum`). On the CPU one ``vmap(grad)`` per
        agent over its records of nonzero weight only: a Poisson batch padded to the largest
        agent's, through the nested vmap, took 2.3x as long (MNIST CNN, 10 agents, expected
        batch 256, one thread: 1,745 ms against 770 ms, the non-private batch gradients 618 ms).
        A GPU takes every agent in one nested call."""
        require(not self._has_bn, "model", "BatchNorm", "a module without BatchNorm (per-sample "
                "gradients of a batch-statistics layer are undefined; use GroupNorm)")
        a = self._agents(agents)
        X = X.to(self.dtype)
        if self.device.type != "cpu":
            xb, yb = self.batch(idx, a)
            return clip.weighted_sum(self._sample_grad(X, xb, yb), weights)
        out = X.new_zeros(X.shape)
        w = weights.to(self.dtype)
        for i in range(len(a)):       # the agents' batches differ in size (see the docstring)
            keep = w[i] != 0
            if not bool(keep.any()):
                continue
            xb, yb = self.batch(idx[i][keep][None], a[i:i + 1])
            out[i] = clip.weighted_sum(self._one_agent_sample_grad(X[i], xb[0], yb[0]),
                                       w[i][keep])
        return out

    def grad(self, X, agents=None) -> torch.Tensor:
        """Full local gradients (all m_i local samples, in chunks of ``chunk``)."""
        a = self._agents(agents)
        X = X.to(self.dtype)
        out = torch.zeros(len(a), self.dim, dtype=self.dtype, device=self.device)
        width = self.parts.shape[1]
        # unequal sizes (m None): the (n, width) weights tensor
        weights = None if self.m is not None else cast(torch.Tensor, self._record_weights(a)).to(self.dtype)
        for start in range(0, width, self.chunk):
            idx = self._local_range(start, len(a))
            xb, yb = self.batch(idx, a)
            if weights is None:
                assert self.m is not None               # weights are None exactly when m is set
                out += self._batch_grad(X, xb, yb) * (idx.shape[1] / self.m)
            else:       # padding weighs 0
                out += self._weighted_grad(X, xb, yb, weights[:, start:start + idx.shape[1]])
        return out

    def local_loss(self, X, agents=None) -> torch.Tensor:
        a = self._agents(agents)
        X = X.to(self.dtype)
        total = torch.zeros(len(a), dtype=torch.float64, device=self.device)
        # unequal sizes (m None): the (n, width) weights tensor
        weights = None if self.m is not None else cast(torch.Tensor, self._record_weights(a))
        with torch.no_grad():
            for start in range(0, self.parts.shape[1], self.chunk):
                idx = self._local_range(start, len(a))
                xb, yb = self.batch(idx, a)
                logits = self._agent_logits(X, xb)
                ce = nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten(),
                                                 reduction="none").reshape(yb.shape)
                if weights is None:
                    total += ce.sum(1).double()
                else:
                    total += (ce.double() * weights[:, start:start + idx.shape[1]]).sum(1)
        return total / cast(int, self.m) if weights is None else total     # weights None: m set

    def _local_range(self, start: int, n: int) -> torch.Tensor:
        """``(n, c)`` local sample indices ``start .. start + chunk - 1`` (clipped at m) of every
        agent: one chunk of a full pass."""
        idx = torch.arange(start, min(self.parts.shape[1], start + self.chunk),
                           device=self.device)
        return idx.expand(n, -1)

    def loss(self, x) -> float:
        """``f(x) = (1/n) sum_i f_i(x)``: the mean loss over every agent's samples (over the fixed
        subset of ``metric_samples`` of them unless that is None)."""
        W = self._point(x, self.dtype)
        return float(self.evaluate_model(W, "train", self.metric_samples)["loss"][0])

    def global_grad(self, x) -> torch.Tensor:
        """``grad f(x)`` (estimated on the ``metric_samples`` subset unless that is None)."""
        row = self._point(x, self.dtype)
        fx, fy, fw = self._split("train", self.metric_samples)
        out = torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        for s in range(0, fy.shape[0], self.chunk):
            xb, yb = self.transform(fx[s:s + self.chunk])[None], fy[s:s + self.chunk][None]
            if fw is None:
                out += self._batch_grad(row, xb, yb)[0] * (yb.shape[1] / fy.shape[0])
            else:
                out += self._weighted_grad(row, xb, yb,
                                           fw[s:s + self.chunk][None].to(self.dtype))[0]
        return out

    def metric_records(self) -> int:
        total = int(self.sizes.sum())
        sample = total if self.metric_samples is None else min(total, self.metric_samples)
        return self.metric_passes() * sample

    # -- evaluation -------------------------------------------------------------------------
    def _split(self, which, max_samples: int | None):
        """``(inputs, labels, weights)``: weights None (a plain mean) or, for the training union
        of unequal local sizes, ``1/(n m_i)`` per record of agent i (summing to 1)."""
        weights = None
        if isinstance(which, tuple):          # a held-out set of the caller's: (images, labels)
            fx, fy = (torch.as_tensor(np.asarray(v), device=self.device) for v in which)
            fy = fy.to(torch.int64)
        elif which == "test":
            require(self.test is not None, "which", which, "a problem built with a test set")
            assert self.test is not None                # the require above raised otherwise
            fx, fy = self.test
        else:
            require(which == "train", "which", which, "'train' or 'test'")
            self._require_all("the training-union metrics")
            if self.m is not None:
                rows = self.parts.reshape(-1)
            else:
                assert self._weights is not None        # _set_sizes: weights exactly when m is None
                valid = self._weights > 0
                rows, weights = self.parts[valid], self._weights[valid] / self.n_agents
            fx, fy = self.features[rows], self.labels[rows]
        if max_samples is not None and max_samples < fy.shape[0]:
            # a fixed, evenly spaced subset: the same for every call (comparable curves)
            sel = torch.linspace(0, fy.shape[0] - 1, max_samples,
                                 device=fy.device).round().long()
            fx, fy = fx[sel], fy[sel]
            weights = None if weights is None else weights[sel] / weights[sel].sum()
        return fx, fy, weights

    def evaluate_model(self, W: torch.Tensor, which: str | tuple = "test",
                       max_samples: int | None = None) -> dict[str, np.ndarray]:
        """Loss and accuracy of each parameter row of ``W`` (``(r, P)``) on the whole test set,
        the training union or a given held-out ``(images, labels)`` pair (or a fixed evenly
        spaced subset of ``max_samples``). Computed on the problem's device; the arrays come
        back on the host."""
        W = torch.as_tensor(W, dtype=self.dtype, device=self.device)
        fx, fy, fw = self._split(which, max_samples)
        loss = torch.zeros(W.shape[0], dtype=torch.float64, device=self.device)
        correct = torch.zeros(W.shape[0], dtype=torch.float64, device=self.device)
        step = max(1, (self.chunk * 8) // max(1, W.shape[0]))
        with torch.no_grad():
            for s in range(0, fy.shape[0], step):
                xb, yb = self.transform(fx[s:s + step]), fy[s:s + step]
                logits = self._shared_logits(W, xb)                     # (r, b, classes)
                ce = nn.functional.cross_entropy(logits.flatten(0, 1), yb.repeat(W.shape[0]),
                                                 reduction="none").reshape(W.shape[0], -1)
                hit = logits.argmax(-1) == yb
                if fw is None:
                    loss += ce.sum(1).double()
                    correct += hit.sum(1).double()
                else:
                    wb = fw[s:s + step].double()
                    loss += (ce.double() * wb).sum(1)
                    correct += (hit.double() * wb).sum(1)
        n = fy.shape[0] if fw is None else 1.0
        return {"loss": (loss / n).cpu().numpy(), "accuracy": (correct / n).cpu().numpy()}

    def evaluate(self, X: torch.Tensor, which: tuple[str, ...] = ("train", "test"),
                 per_agent: bool = True, max_samples: int | None = None) -> dict[str, object]:
        """``{split}_loss``/``{split}_accuracy`` of the average model x̄ and, with ``per_agent``,
        ``{split}_loss_agents``/``{split}_accuracy_agents`` (arrays over agents)."""
        X = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        out: dict[str, object] = {}
        for split in which:
            if split == "test" and self.test is None:
                continue
            W = X.mean(0, keepdim=True)
            if per_agent:
                W = torch.cat([W, X])
            r = self.evaluate_model(W, split, max_samples)
            out[f"{split}_loss"] = float(r["loss"][0])
            out[f"{split}_accuracy"] = float(r["accuracy"][0])
            if per_agent:
                out[f"{split}_loss_agents"] = r["loss"][1:]
                out[f"{split}_accuracy_agents"] = r["accuracy"][1:]
        return out

    def _keep(self, slots):
        """Keep only the samples of the agents in ``slots`` (the parts are re-indexed)."""
        parts = self.parts[self._index(slots)]
        rows, inverse = torch.unique(parts, return_inverse=True)
        self.features, self.labels = self.features[rows], self.labels[rows]
        self.parts = inverse.reshape(parts.shape)
        self._keep_sizes(slots)

    def describe(self) -> dict:
        """:meth:`Problem.describe <dpnet.problems.base.Problem.describe>` plus the records per agent
        (``samples_per_agent``: m, or the list of the ``m_i``), the module's class name (``module``) and
        its number of ``parameters`` (the dimension d)."""
        return {**super().describe(), "samples_per_agent": self._sizes_text(),
                "module": type(self.model).__name__, "parameters": self.dim}

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_dataset(cls, model: nn.Module, train, n_agents: int, test=None, how: str = "even",
                     seed: int = 0, transform: Transform | None = None, agents=None,
                     partition_params: dict | None = None, **kw) -> NeuralProblem:
        """From :class:`dpnet.data.Dataset` objects, split by the partitioner ``how`` of
        :mod:`dpnet.partitions` (``partition_params``: its parameters): ``"even"`` (random
        even split, the papers' setting), ``"label"`` (label shards), ``"dirichlet"`` (label
        skew, unequal sizes), ... ``agents``: keep only these agents' samples (one rank's
        partition; the split itself is the same on every rank, drawn from ``seed``)."""
        parts = partition(train.y, n_agents, how=how, seed=seed, **(partition_params or {}))
        t = None if test is None else (test.X, test.y)
        problem = cls(model, train.X, train.y, parts, test=t, transform=transform, **kw)
        return problem if agents is None else problem.restrict(agents)


def flat_size(model: nn.Module) -> int:
    """Number of parameters of ``model``: the length d of its flat parameter row."""
    return int(sum(p.numel() for p in model.parameters()))
