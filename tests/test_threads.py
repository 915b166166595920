"""torch_threads: the block runs with the requested count and the caller's is restored."""

import pytest
import torch

from dpnet.threads import torch_threads


def test_thread_count_is_set_then_restored_even_on_error():
    before = torch.get_num_threads()
    other = 2 if before == 1 else 1   # a count that differs from the caller's
    with torch_threads(other):
        assert torch.get_num_threads() == other
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(other):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
