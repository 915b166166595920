"""Your code from the command line and configurations: ``--with FILE`` on run, sweep, privacy,
list and audit, and classes or factories named by import path ``package.module:name``."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from dpnet import algorithms, cli, graphs, problems, registry
from dpnet.algorithms.base import REGISTRY
from dpnet.errors import ParameterError, UnknownNameError

USER = textwrap.dedent('''
    """A user's algorithm, graph and problem, registered or named by import path."""
    import dpnet
    from dpnet import graphs, problems
    from dpnet.algorithms import DGD
    from dpnet.algorithms.base import register


    @register
    class HeavyBallDGD(DGD):
        """DGD with a heavy-ball term: x+ = W x - eta g + beta (x - x_prev)."""
        name = "user_heavy_ball"
        paper = "a user's variant"

        def __init__(self, eta: float, beta: float = 0.5) -> None:
            super().__init__(eta)
            self.beta = beta

        def init(self, ctx, x0):
            return {"x": x0, "x_prev": x0}

        def step(self, ctx, state, k):
            x = state["x"]
            mixed = ctx.net.mix(ctx.net.exchange(x, "x"))
            nxt = mixed - self.eta * ctx.grad(x, None, k) + self.beta * (x - state["x_prev"])
            return {"x": nxt, "x_prev": x}


    def two_rings(n: int = 6):
        return graphs.circulant(n, offsets=(1, 2))


    def small_problem(n_agents: int = 6, seed: int = 0):
        return problems.NonconvexLogistic.random(n_agents, samples=[5, 9, 7, 5, 8, 6], dim=3,
                                                 seed=seed)
''')

CONFIG = '''
iterations = 5
log_every = 1
[graph]
name = "{mod}:two_rings"
n = 6
[problem]
name = "{mod}:small_problem"
n_agents = 6
[algorithm]
name = "{alg}"
eta = 0.1
'''


@pytest.fixture
def user_file(tmp_path, monkeypatch):
    path = tmp_path / "my_code_for_dpnet.py"
    path.write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_EXTENSIONS", [])
    with REGISTRY.restoring():
        yield path
    sys.modules.pop("my_code_for_dpnet", None)


def test_run_with_a_registered_algorithm_and_factories_by_import_path(user_file, tmp_path,
                                                                       capsys):
    cfg = tmp_path / "hb.toml"
    # the built-in graph and problem: only --with brings the algorithm's name
    cfg.write_text(CONFIG.format(mod="my_code_for_dpnet", alg="user_heavy_ball")
                   .replace('"my_code_for_dpnet:two_rings"', '"ring"')
                   .replace('"my_code_for_dpnet:small_problem"', '"nonconvex_logistic"'))
    out = tmp_path / "out"
    # not imported: a named error (exit status 2), never a traceback
    assert cli.main(["run", str(cfg), "--out", str(out), "--quiet"]) == 2
    assert "unknown algorithm 'user_heavy_ball'" in capsys.readouterr().err
    assert cli.main(["run", str(cfg), "--with", str(user_file), "--out", str(out),
                     "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "user_heavy_ball" and summary["params"]["beta"] == 0.5
    rows = (out / "result.csv").read_text().splitlines()
    assert len(rows) == 1 + 6                                      # header and iterations 0..5


def test_the_algorithm_itself_by_import_path(user_file, tmp_path):
    cfg = tmp_path / "hb.toml"
    cfg.write_text(CONFIG.format(mod="my_code_for_dpnet", alg="my_code_for_dpnet:HeavyBallDGD"))
    assert cli.main(["run", str(cfg), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert algorithms.get("my_code_for_dpnet:HeavyBallDGD").name == "user_heavy_ball"
    assert graphs.from_spec({"name": "my_code_for_dpnet:two_rings", "n": 8}).n == 8
    p = problems.from_spec({"name": "my_code_for_dpnet:small_problem", "n_agents": 6})
    assert p.local_sizes().tolist() == [5, 9, 7, 5, 8, 6]
    with pytest.raises(ParameterError, match="Algorithm subclass"):
        algorithms.get("my_code_for_dpnet:two_rings")
    with pytest.raises(UnknownNameError, match="my_code_for_dpnet:nothing"):
        algorithms.get("my_code_for_dpnet:nothing")


def test_list_and_privacy_take_with(user_file, capsys):
    assert cli.main(["list", "algorithms", "--with", str(user_file)]) == 0
    assert "user_heavy_ball" in capsys.readouterr().out
    assert cli.main(["privacy", "dp_sgd", "--with", "no_such_file.py"]) == 2
    assert "--with='no_such_file.py'" in capsys.readouterr().err


def test_workers_started_by_spawn_import_the_with_extensions(user_file, monkeypatch):
    """A spawned worker copies no module of its parent (CUDA runs spawn them): without the
    extensions a user's algorithm is unknown there; the pool's initializer imports them."""
    from dpnet.lab import store

    registry.import_extensions([str(user_file)])
    assert registry.imported_extensions() == (str(user_file.resolve()),)
    pool = store._pool(1, method="spawn")
    try:
        cls = pool.submit(algorithms.get, "user_heavy_ball").result(timeout=300)
    finally:
        pool.shutdown()
    assert cls.__name__ == "HeavyBallDGD"
    monkeypatch.setattr(registry, "_EXTENSIONS", [])         # as before: nothing passed on
    pool = store._pool(1, method="spawn")
    try:
        with pytest.raises(UnknownNameError, match="user_heavy_ball"):
            pool.submit(algorithms.get, "user_heavy_ball").result(timeout=300)
    finally:
        pool.shutdown()


def test_every_dpnet_error_survives_a_trip_between_processes():
    """What a worker raises comes back as the same error with the same message (a subclass whose
    __init__ takes other arguments than its message broke the pool instead)."""
    import pickle

    from dpnet.data import DataError
    from dpnet.distributed import DistributedError
    from dpnet.errors import NonFiniteError

    for err in (ParameterError("lr", lambda: 0, "lr > 0", "a hint"),
                UnknownNameError("algorithm", "nosuch", ["dgd", "dp_sgd"]),
                NonFiniteError(7, "x", "detail"), DataError("missing a9a"),
                DistributedError("rank 1 died")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
    back = pickle.loads(pickle.dumps(UnknownNameError("graph", "rng", ["ring"])))
    assert (back.kind, back.name, back.known) == ("graph", "rng", ["ring"])
