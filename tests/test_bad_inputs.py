"""Every bad input of the foundation issue raises an error naming the parameter, the value and the
violated condition (unknown names: listing the known ones)."""

import numpy as np
import pytest
import torch

import dpnet
from dpnet import algorithms, cli, compression, graphs, noise, problems
from dpnet.algorithms import DGD, DiaDSP, GradientTracking
from dpnet.errors import NonFiniteError, ParameterError, UnknownNameError, positive_int
from dpnet.lab import config
from dpnet.lab.compare import entries


def _raises(call, name, value, condition):
    """The call raises ParameterError for ``name``, quoting ``value`` and ``condition``."""
    with pytest.raises(ParameterError) as err:
        call()
    e = err.value
    msg = str(e)
    assert e.name == name, msg
    assert msg.startswith(f"{name}=") and value in msg and condition in msg, msg
    assert condition in e.condition
    return e


P6 = problems.Quadratic.random(6, 3, seed=0)


def test_weight_matrix_not_doubly_stochastic():
    row_only = graphs.from_edges(6, [(i, i + 1) for i in range(5)], weights="uniform")
    for alg in (DGD(0.1), GradientTracking(0.1), DiaDSP(0.1)):
        _raises(lambda alg=alg: dpnet.run(alg, P6, row_only, 3), "graph.W",
                "row sums in [1, 1], column sums in [0.8333, 1.167]",
                f"{alg.name} needs a doubly stochastic W (W1 = 1 and 1^T W = 1^T)")
    # doubly stochastic, but zero self-weights on a bipartite ring: rho = 0
    W = 0.5 * (np.roll(np.eye(6), 1, 1) + np.roll(np.eye(6), -1, 1))
    _raises(lambda: dpnet.run(DiaDSP(0.1), P6, graphs.from_weights(W, name="bipartite"), 3),
            "graph.W", "'bipartite'", "diadsp needs rho = 1 - rho(W - 11^T/n) > 0")


def test_disconnected_graph():
    B = np.zeros((6, 6))
    B[:3, :3] = B[3:, 3:] = 1 / 3
    g = graphs.from_weights(B, name="two-triangles")
    e = _raises(lambda: dpnet.run(DGD(0.1), P6, g, 3), "graph", "'two-triangles'",
                "the graph must be connected")
    assert "it has 2 components" in str(e)
    d = graphs.from_edges(3, [(0, 1), (1, 2)], directed=True)
    _raises(d.require_connected, "graph", "'digraph(3)'", "the graph must be strongly connected")


@pytest.mark.parametrize("decay", [0.0, 1.0, 1.5, -0.2])
def test_noise_decay_outside_the_unit_interval(decay):
    _raises(lambda: noise.Laplace(1.0, decay=decay), "decay", repr(decay),
            "0 < decay < 1 (geometric noise decay q^k)")
    _raises(lambda: noise.Gaussian(1.0, decay=decay), "decay", repr(decay), "0 < decay < 1")
    # and from a config table
    _raises(lambda: algorithms.from_spec({"name": "diadsp", "eta": 0.1,
                                          "noise_x": {"scale": 1.0, "decay": decay}}),
            "decay", repr(decay), "0 < decay < 1")


def test_negative_noise_scale():
    _raises(lambda: noise.Laplace(-0.5), "scale", "-0.5",
            "scale >= 0 (noise scales cannot be negative)")
    _raises(lambda: noise.Gaussian([1.0, -2.0], decay=0.5), "scale", "[1.0, -2.0]", "scale >= 0")


def test_topk_k_outside_1_to_d():
    net = dpnet.Network(graphs.ring(4))
    X = torch.zeros(4, 10, dtype=torch.float64)
    _raises(lambda: net.exchange(X, "x", compression.TopK(12)), "k", "12",
            "1 <= k <= d = 10 (TopK keeps k of d coordinates)")
    _raises(lambda: compression.TopK(12).bits(10), "k", "12", "1 <= k <= d = 10")
    for k in (0, -3):
        _raises(lambda k=k: compression.TopK(k), "k", repr(k), "k must be an integer >= 1")
    _raises(lambda: compression.from_spec({"name": "topk", "k": 0}), "k", "0", "integer >= 1")


def test_x0_of_the_wrong_shape():
    for bad in (np.zeros((6, 4)), np.zeros(4), np.zeros((5, 3))):
        _raises(lambda bad=bad: dpnet.run(DGD(0.1), P6, graphs.ring(6), 3, x0=bad), "x0",
                repr(bad.shape), "shape (d,) = (3,) or (n, d) = (6, 3)")


def test_non_finite_iterate():
    p = problems.SinCos.random(6, 4, seed=1)
    with pytest.raises(NonFiniteError) as err:
        dpnet.run(DGD(eta=1e3), p, graphs.ring(6), 500)
    msg = str(err.value)
    assert f"non-finite value in 'x' at iteration {err.value.iteration}" in msg
    assert "the run diverged (reduce the step size or the noise scale)" in msg


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownNameError) as err:
        algorithms.get("diadps")
    msg = str(err.value)
    assert msg.startswith("unknown algorithm 'diadps'; known algorithms: ")
    for known in ("dgd", "diadsp", "dsgd", "gradient_tracking"):
        assert known in msg
    with pytest.raises(UnknownNameError) as err:
        graphs.from_spec({"name": "torus", "n": 4})
    assert str(err.value) == ("unknown graph 'torus'; known graphs: circulant, complete, "
                              "cyclic, erdos_renyi, explicit, geometric, grid, link_failures, "
                              "one_peer_exponential, path, random_matchings, ring, star, "
                              "watts_strogatz")
    with pytest.raises(UnknownNameError,
                       match="known problems: logistic_regression, neural, nonconvex_logistic"):
        problems.from_spec({"name": "mnist"})
    with pytest.raises(UnknownNameError, match="known compressors: identity"):
        compression.from_spec("gzip")
    with pytest.raises(UnknownNameError, match="unknown noise kind 'cauchy'; known noise kinds: "
                                               "gaussian, laplace"):
        noise.from_spec({"kind": "cauchy"})
    with pytest.raises(UnknownNameError, match="known benchmark entries: .*doadp_poisson"):
        entries.entry("dpsgd")
    _raises(lambda: algorithms.from_spec({"name": "dgd", "eta": 0.1, "stepsize": 2}),
            "algorithm.dgd", "['stepsize']", "parameters among")


CONFIG = """
iterations = 5
[graph]
name = "{graph}"
n = 6
[problem]
name = "quadratic"
dim = 3
[algorithm]
name = "{algorithm}"
eta = 0.1
"""


@pytest.mark.parametrize("graph, algorithm, kind, name", [
    ("ring", "diadps", "algorithm", "diadps"), ("torus", "diadsp", "graph", "torus")])
def test_unknown_names_in_a_config_file(tmp_path, capsys, graph, algorithm, kind, name):
    path = tmp_path / "bad.toml"
    path.write_text(CONFIG.format(graph=graph, algorithm=algorithm))
    with pytest.raises(UnknownNameError) as err:
        config.run(config.load(path), tmp_path / "out", quiet=True)
    assert str(err.value).startswith(f"unknown {kind} '{name}'; known {kind}s: ")
    assert "ring" in str(err.value) or "diadsp" in str(err.value)
    # the command line reports it without a traceback
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert f"unknown {kind} '{name}'" in capsys.readouterr().err
    assert not (tmp_path / "out" / "result.csv").exists()


def test_a_noise_parameter_is_one_annotated_as_noise_not_one_named_noise():
    # DP-SGD's noise_multiplier and DOLA's noise_scale are numbers; read as Laplace scales by
    # their names, a configuration of either failed with a TypeError inside the constructor
    assert algorithms.noise_parameters(algorithms.DPSGD) == frozenset()
    assert algorithms.noise_parameters(algorithms.DOLA) == frozenset()
    assert algorithms.noise_parameters(algorithms.DiaDSP) == {"noise_x", "noise_y"}
    sgd = algorithms.from_spec({"name": "dp_sgd", "lr": 0.3, "noise_multiplier": 1.2,
                                "rate": 0.1, "ema_decay": 0.9})
    assert sgd.noise_multiplier == 1.2 and sgd._noise.scale_at(0, 1)[0] == 1.2   # z C, C = 1
    assert sgd.released == ("state", "x_ema")
    dola = algorithms.from_spec({"name": "dola", "alpha0": 0.5, "noise_scale": 2.0})
    assert dola.noise_scale == 2.0


def test_dpnet_run_takes_a_dp_sgd_configuration(tmp_path):
    import json

    from dpnet.privacy import dp_sgd

    (tmp_path / "c.toml").write_text(
        'seed = 0\niterations = 20\nlog_every = 10\n[graph]\nname = "ring"\nn = 4\n'
        '[problem]\nname = "nonconvex_logistic"\nsamples = 40\ndim = 5\n'
        '[algorithm]\nname = "dp_sgd"\nlr = 0.3\nnoise_multiplier = 1.5\nrate = 0.1\n'
        'ema_decay = 0.9\n[privacy]\naccountant = "pld"\ndelta = 1e-5\n')
    assert cli.main(["run", str(tmp_path / "c.toml"), "--quiet", "--out",
                     str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["params"]["noise_multiplier"] == 1.5
    assert summary["privacy"]["epsilon"] == pytest.approx(
        dp_sgd.epsilon(1.5, "poisson", 0.1, 20, 1e-5), rel=1e-9)


def test_a_decay_with_no_noise_scale_to_apply_it_to_is_refused():
    _raises(lambda: config.algorithm_from_flags("dp_sgd", {
        "lr": 0.3, "noise_multiplier": 1.0, "rate": 0.1, "decay": 0.9}),
        "--decay", "0.9", "a noise scale to apply it to (dp_sgd is given none)")


def test_an_unknown_names_kind_is_pluralised_in_english():
    from dpnet import graphs

    with pytest.raises(UnknownNameError, match="known matrices: A, I, L, W"):
        graphs.ring(4).sparse("metropolis")
    assert "known accountants" in str(UnknownNameError("accountant", "x", ["a"]))
    assert "known policies" in str(UnknownNameError("policy", "x", ["a"]))
    assert "known keys" in str(UnknownNameError("key", "x", ["a"]))


def test_a_bool_is_not_a_count():
    """True is an int to Python; as a count (iterations, agents, batch size) it is a mistake."""
    with pytest.raises(ParameterError, match="iterations=True violates"):
        positive_int("iterations", True)
    assert positive_int("iterations", 3.0) == 3
