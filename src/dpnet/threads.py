"""Torch's intra-op thread count for a block of code, and the thread policy of :func:`dpnet.run`.

Small stacked tensors (agents x d with d ~ 10, or ~1e5-element audit batches) gain nothing from
intra-op threads, and on a busy 2-core machine idle OpenMP threads spinning cost 3-30x the useful
work: experiments and audits of that size run with one thread and restore the caller's setting.

**The policy of a run** (:func:`run_threads`): ``threads=`` of :func:`dpnet.run` when given, else
the environment variable ``DPNET_THREADS`` when set, else one thread when
``n_agents * dim < THREADS_MIN_SIZE`` and the problem is not a neural network, else the caller's
current count (torch's default unless the caller changed it). Measured on the 2-core development
machine (DiaDSP on NonconvexLogistic, ms per iteration, 1 thread vs 2; details and the command in
benchmarks/RESULTS.md, "Start-up and busy machine"): idle, 2 threads gain 1.1-1.4x below
``n d = 10^4`` (within the machine's noise), 2.1x at 10^5 and 1.8x at 10^6; with the other core
busy, 1 thread wins at every size (3.3x at 6 x 10, 2.5x at 10^5, 1.7x at 10^6). Below 10^5 the
gain when idle is small and the loss when busy is large, hence one thread; above, the gain when
idle is large, and a busy machine's user sets ``DPNET_THREADS=1``. Neural problems keep the
caller's count: convolutions and matrix products over batches gain from threads at any size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np
import torch

from .errors import ParameterError

#: ``n_agents * dim`` from which a run keeps the caller's thread count (see the module docstring)
THREADS_MIN_SIZE = 100_000


@contextlib.contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def check_threads(name: str, value) -> int:
    """``value`` as a thread count: an integer >= 1 (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ParameterError(name, value, f"{name} must be an integer >= 1 (or None for the policy)")
    return int(value)


def run_threads(n_agents: int, dim: int, neural: bool = False, threads: int | None = None) -> int:
    """Intra-op threads for a run of ``n_agents`` rows of ``dim`` (the module docstring's policy):
    ``threads`` if given, else ``$DPNET_THREADS`` if set, else 1 for a small non-neural problem,
    else the caller's current count."""
    if threads is not None:
        return check_threads("threads", threads)
    env = os.environ.get("DPNET_THREADS", "").strip()
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ParameterError("DPNET_THREADS", env, "an integer >= 1 (the environment "
                                 "variable; unset it for the policy)") from None
        return check_threads("DPNET_THREADS", value)
    if neural or n_agents * dim >= THREADS_MIN_SIZE:
        return torch.get_num_threads()
    return 1
