"""Checkpoint files: plain data in, the same run out, and never code executed on load."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

import dpnet
from dpnet import checkpoints, compression, graphs, noise
from dpnet.distributed import RankCheckpoints
from dpnet.errors import ParameterError
from dpnet.network import BitLedger, Transcript, TranscriptEntry
from dpnet.problems import NonconvexLogistic

SEED = 5


def _pgtc_setup():
    lap = noise.Laplace(0.05, decay=0.9)
    alg = dpnet.algorithms.PGTC(eta=0.1, gamma=0.3, alpha_x=0.5, alpha_y=0.5,
                                compressor=compression.TopK(2), noise_x=lap, noise_y=lap)
    return alg, NonconvexLogistic.random(n_agents=6, samples=12, dim=5, seed=1), graphs.ring(6)


def _is_plain(value) -> bool:
    if isinstance(value, dict):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_is_plain(v) for v in value)
    return type(value) in (type(None), bool, int, float, complex, str, torch.Tensor)


# -- round trip -----------------------------------------------------------------------------
def test_resume_from_a_file_reproduces_the_uninterrupted_run(tmp_path):
    alg, problem, graph = _pgtc_setup()
    paths = []

    def save(snap):
        paths.append(checkpoints.save(snap, tmp_path / f"ckpt-{snap['iteration']}.pt"))

    kw = dict(seed=SEED, record=True, log_every=3)
    full = dpnet.run(alg, problem, graph, 10, checkpoint=save, checkpoint_every=4, **kw)
    assert [p.name for p in paths] == ["ckpt-4.pt", "ckpt-8.pt"]
    assert not list(tmp_path.glob("*.tmp"))
    snap = checkpoints.load(paths[0])
    assert _is_plain(snap) and "format" not in snap and snap["iteration"] == 4
    resumed = dpnet.run(alg, problem, graph, 10, resume=snap, **kw)
    np.testing.assert_array_equal(resumed.x, full.x)
    for key, v in full.history.items():
        np.testing.assert_array_equal(resumed.history[key], v)
    assert resumed.ledger.as_dict() == full.ledger.as_dict()
    np.testing.assert_array_equal(resumed.ledger.per_agent_iteration(10),
                                  full.ledger.per_agent_iteration(10))
    for name in full.transcript.names():
        np.testing.assert_array_equal(resumed.transcript.stacked(name),
                                      full.transcript.stacked(name))
    # the file is reusable: resuming from it again gives the same run again
    again = dpnet.run(alg, problem, graph, 10, resume=checkpoints.load(paths[0]), **kw)
    np.testing.assert_array_equal(again.x, full.x)


def test_ledger_and_transcript_round_trip_as_independent_copies():
    ledger = BitLedger(3, detailed=True)
    ledger.charge(0, "x", np.array([0, 2]), np.array([64, 32]))
    ledger.charge(1, "y", np.array([1]), np.array([8]))
    state = ledger.to_state()
    back = BitLedger.from_state(state)
    assert back.as_dict() == ledger.as_dict()
    np.testing.assert_array_equal(back.per_agent_iteration(), ledger.per_agent_iteration())
    back.charge(1, "y", np.array([1]), np.array([8]))  # adds in place: must not reach the state
    assert BitLedger.from_state(state).as_dict() == ledger.as_dict()

    tr = Transcript()
    tr.append(TranscriptEntry(0, "x", np.array([0, 2]), torch.ones(2, 3)))
    tr_back = Transcript.from_state(tr.to_state())
    assert [(e.iteration, e.name) for e in tr_back.entries] == [(0, "x")]
    np.testing.assert_array_equal(tr_back.stacked("x", 3), tr.stacked("x", 3))


def test_save_converts_numpy_and_refuses_other_objects(tmp_path):
    path = checkpoints.save({"a": np.float64(0.5), "b": np.arange(3), "c": (1, [np.int64(2)])},
                            tmp_path / "np.pt")
    snap = checkpoints.load(path)
    assert snap["a"] == 0.5 and type(snap["a"]) is float
    assert torch.equal(snap["b"], torch.arange(3))
    assert snap["c"] == (1, [2]) and type(snap["c"][1][0]) is int
    with pytest.raises(ParameterError, match=r"snapshot\['x'\]\[0\]=.*object.*plain data"):
        checkpoints.save({"x": [object()]}, tmp_path / "bad.pt")
    with pytest.raises(ParameterError, match="format"):
        checkpoints.save({"format": "mine"}, tmp_path / "bad.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["np.pt"]


def test_a_failed_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = checkpoints.save({"iteration": 1}, tmp_path / "c.pt")

    def torn(obj, f):
        f.write(b"PK\x03\x04 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn)
    with pytest.raises(OSError, match="disk full"):
        checkpoints.save({"iteration": 2}, path)
    monkeypatch.undo()
    assert checkpoints.load(path) == {"iteration": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


# -- refusal --------------------------------------------------------------------------------
class _ExecPayload:
    """Unpickling this runs Python code (``exec``) that creates ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('executed')",)


class _ShellPayload:
    """Unpickling this calls ``os.system`` to create ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch '{self.marker}'",)


def _torch_file(path, payload):
    torch.save({"format": checkpoints.FORMAT, "iteration": 3, "state": payload}, path)


def _raw_pickle(path, payload):  # protocol 2 names its globals with the GLOBAL instruction
    path.write_bytes(pickle.dumps({"format": checkpoints.FORMAT, "state": payload}, protocol=2))


def _raw_pickle_5(path, payload):  # framed: refused at its first unsupported instruction
    path.write_bytes(pickle.dumps({"format": checkpoints.FORMAT, "state": payload}, protocol=5))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
@pytest.mark.parametrize("write", [_torch_file, _raw_pickle, _raw_pickle_5])
@pytest.mark.parametrize("payload", [_ExecPayload, _ShellPayload])
def test_a_file_that_would_execute_code_is_refused_without_running_it(tmp_path, write, payload):
    marker, path = tmp_path / "marker", tmp_path / "evil.pt"
    write(path, payload(marker))
    with pytest.raises(ParameterError) as err:
        checkpoints.load(path)
    assert not marker.exists()
    msg = str(err.value)
    assert f"{path} is not one" in msg and "refused before anything in it was run" in msg
    if write is _raw_pickle_5:  # framed: stopped at its first instruction
        assert "pickle instruction" in msg
    else:
        assert ("names exec" if payload is _ExecPayload else "system") in msg
        assert "would execute code" in msg
    # the payload is real: an unrestricted load does run it
    if write is _torch_file:
        torch.load(path, weights_only=False)
    else:
        pickle.loads(path.read_bytes())
    assert marker.exists()


def test_rank_checkpoints_refuse_a_foreign_file(tmp_path):
    store = RankCheckpoints(tmp_path, rank=0, world_size=2, offsets=np.array([0, 3, 6]))
    marker = tmp_path / "marker"
    _torch_file(store.path(4), _ExecPayload(marker))
    with pytest.raises(ParameterError, match="ckpt-000000004.rank0-of-2.pt"):
        store.load(4)
    assert not marker.exists()
    store.save({"iteration": 8, "state": {"x": torch.zeros(3, 2)}})
    assert store.load(8)["offsets"] == [0, 3, 6]


@pytest.mark.parametrize("content, found", [
    ({"iteration": 3}, "format' is None"),                     # no marker
    ({"iteration": 3, "format": "other/2"}, "format' is 'other/2'"),
    ([1, 2], "holds a list, not a dict"),
])
def test_a_file_without_the_format_marker_is_refused(tmp_path, content, found):
    path = tmp_path / "other.pt"
    torch.save(content, path)
    with pytest.raises(ParameterError, match="dpnet-checkpoint/1") as err:
        checkpoints.load(path)
    assert f"{path} is not one" in str(err.value) and found in str(err.value)


def test_unreadable_and_missing_files_are_refused(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ParameterError, match="garbage.pt is not one"):
        checkpoints.load(garbage)
    with pytest.raises(ParameterError, match="missing.pt.*existing checkpoint file"):
        checkpoints.load(tmp_path / "missing.pt")


def _snapshots(problem, graph, K=6, every=2):
    from dpnet.algorithms import DGD

    snaps = []
    dpnet.run(DGD(0.1), problem, graph, K, checkpoint=snaps.append, checkpoint_every=every,
              progress=False)
    return snaps


def test_a_snapshot_resumes_only_its_own_problem_and_graph():
    """Issue 38 item 6: a checkpoint carries the problem's and graph's fingerprint; a resume on
    another problem (same shape, other data) or another graph (same n) is refused by name."""
    from dpnet.algorithms import DGD
    from dpnet.problems import Quadratic

    mine, other = Quadratic.random(n_agents=5, dim=3, seed=0), Quadratic.random(n_agents=5,
                                                                               dim=3, seed=1)
    snaps = _snapshots(mine, graphs.ring(5))
    full = dpnet.run(DGD(0.1), mine, graphs.ring(5), 6, progress=False)
    resumed = dpnet.run(DGD(0.1), mine, graphs.ring(5), 6, resume=snaps[1], progress=False)
    np.testing.assert_array_equal(resumed.x, full.x)
    with pytest.raises(ParameterError, match="resume.fingerprint.*problem and graph"):
        dpnet.run(DGD(0.1), other, graphs.ring(5), 6, resume=snaps[1], progress=False)
    with pytest.raises(ParameterError, match="resume.fingerprint"):
        dpnet.run(DGD(0.1), mine, graphs.complete(5), 6, resume=snaps[1], progress=False)


@pytest.mark.parametrize("damage, message", [
    (lambda s: {**s, "iteration": -5}, "resume.iteration"),
    (lambda s: {**s, "iteration": 99}, "resume.iteration"),
    (lambda s: {**s, "iteration": 2.5}, "resume.iteration"),
    (lambda s: {k: v for k, v in s.items() if k != "state"}, "without state"),
    (lambda s: {**s, "state": {"x": "not a tensor"}}, "damaged"),
    (lambda s: {**s, "network": {"nonsense": 1}}, "damaged"),
    (lambda s: [1, 2, 3], "resume='list'"),
])
def test_a_damaged_or_out_of_range_snapshot_is_a_named_error(damage, message):
    from dpnet.algorithms import DGD
    from dpnet.problems import Quadratic

    problem = Quadratic.random(n_agents=4, dim=2, seed=0)
    snap = _snapshots(problem, graphs.ring(4))[0]
    with pytest.raises(ParameterError, match=message):
        dpnet.run(DGD(0.1), problem, graphs.ring(4), 6, resume=damage(snap), progress=False)
