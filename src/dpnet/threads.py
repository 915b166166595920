"""Torch's intra-op thread count for a block of code.

Small stacked tensors (agents x d with d ~ 10, or ~1e5-element audit batches) gain nothing from
intra-op threads, and on a busy 2-core machine idle OpenMP threads spinning cost 3-30x the useful
work: experiments and audits of that size run with one thread and restore the caller's setting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(n: int = 1) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
