"""The ``dpnet`` command: argparse, one call into the lab layer, print.

```text
dpnet list [algorithms|graphs|compressors|problems|experiments]
dpnet run CONFIG.toml [key=value ...] [--out DIR] [--backend simulated|distributed]
dpnet sweep CONFIG.toml [key=value ...] --set key=v1,v2,... [--seeds 0-4] [--jobs N] [--out DIR]
dpnet privacy NAME --param value ... [--iterations K] [--gradient-bound M] [--adjacency D]
dpnet demo [--out DIR] [--quick]
dpnet compare [--tasks T,...] [--epsilons E,...] [--algorithms A,...] [--quick] [--jobs N]
dpnet reproduce NAME [NAME ...] | all [--quick] [--plan] [--out DIR]
dpnet audit NAME [NAME ...] | all | --attack [SCENARIO ...] | --canary EPSILON
dpnet cache [--prune DAYS | --clear]
```

The commands that read algorithms, entries or audit targets take ``--with MODULE`` (your own). A
usage error exits with status 2, a run that failed with 1; progress goes to stderr through the
``dpnet`` logger (``--quiet`` hides it)."""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any, cast

from . import algorithms, compression, data, distributed, graphs, partitions, problems, registry
from .errors import DPNetError, NonFiniteError, ParameterError, UnknownNameError, positive_int, require
from .lab import audit, compare, config, report, reproduce, store, sweep
from .privacy import accountants
from .privacy.assumptions import ASSUMPTIONS
from .runner import RunDiagnosis
from .version import __version__

# -- helpers ---------------------------------------------------------------------------------


def _parse_params(tokens: list[str]) -> dict[str, Any]:
    """``--eta 0.1 --noise-x 100`` -> {"eta": 0.1, "noise_x": 100}."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            raise ParameterError("argument", tok, "parameters are given as --name value")
        key = tok[2:].replace("-", "_")
        if "=" in key:
            key, val = key.split("=", 1)
            step = 1
        elif i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
            raise ParameterError(tok, None, "needs a value")
        else:
            val, step = tokens[i + 1], 2
        if key in out:
            raise ParameterError(f"--{key.replace('_', '-')}", [out[key], config.parse_value(val)],
                                 "given once")
        out[key] = config.parse_value(val)
        i += step
    return out


# -- commands --------------------------------------------------------------------------------


def cmd_list(args) -> int:
    """``dpnet list [WHAT]``: print each registry's names with a one-line description (all of them, or
    only the section WHAT: algorithms, graphs, compressors, problems, partitioners, experiments,
    accountants or tasks), after importing the ``--with`` extensions. Exit status 0."""
    _import_extensions(args.extensions)
    what = args.what
    tables = {
        "algorithms": {k: (v.paper or v.__doc__ or "").strip().splitlines()[0]
                       for k, v in algorithms.available().items()},
        "graphs": {k: (v.__doc__ or "").strip().splitlines()[0] if v.__doc__ else ""
                   for k, v in {**graphs.CONSTRUCTORS, **graphs.SCHEDULES}.items()},
        "compressors": {k: (v.__doc__ or "").strip().splitlines()[0]
                        for k, v in compression.REGISTRY.items()},
        "problems": {**{k: (v.__doc__ or "").strip().splitlines()[0]
                        for k, v in problems.RANDOM.items()},
                     "logistic_regression": "a LIBSVM dataset (dataset = ...), split by a "
                                            "partitioner (how = ..., with its parameters)",
                     "neural": "a model on an image dataset or your .npz (dataset, model, "
                               "how = ...)"},
        "partitioners": {k: (v.__doc__ or "").strip().splitlines()[0] if v.__doc__ else
                         f"dpnet.partitions.{v.__name__}"
                         for k, v in partitions.PARTITIONERS.items()},
        "experiments": {k: f"{v.title} [{v.paper}]" for k, v in reproduce.available().items()},
        "accountants": {k: ", ".join(v) for k, v in accountants.every().items()},
        "tasks": {k: f"{v.title.format(dataset=v.dataset or 'a9a')} [{v.utility}]"
                  for k, v in compare.TASKS.items()},
    }
    for section, rows in tables.items():
        if what not in (None, section):
            continue
        print(f"{section}:")
        if section == "accountants":
            print("  (generic ones read an algorithm's mechanism(); theorem ones are registered "
                  "per algorithm)")
        for key, text in rows.items():
            print(f"  {key:24s} {text}")
    return 0


def cmd_run(args) -> int:
    """``dpnet run CONFIG.toml [key=value ...]``: validate the configuration with its overrides, run it
    (simulated, or over torchrun's processes with ``--backend distributed``), write ``result.csv``,
    ``result.png`` and ``summary.json`` to ``--out`` (default ``runs/<config name>``) and print the final
    metrics, the bits, the privacy guarantee and the run's diagnosis notes. In a distributed run only rank
    0 prints. Exit status 0."""
    _import_extensions(args.extensions)
    cfg = config.validate(config.apply_overrides(config.load(args.config), args.overrides))
    out = Path(args.out or cfg.get("output", {}).get("dir", "runs/" + Path(args.config).stem))
    replacing = (out / "summary.json").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunDiagnosis)    # printed below, once
        res = config.run(cfg, out, quiet=args.quiet, backend=args.backend, device=args.device)
    if args.backend == "distributed" and not distributed.is_rank0():
        return 0
    summary = res.summary()
    print(json.dumps({"final": summary["final"], "bits": summary["bits"]["total"]}, indent=2))
    print(res.privacy)
    for line in res.diagnosis():
        print(f"note: {line}")
    if replacing:
        print(f"replaced the previous run's files in {out}")
    print(f"wrote {out}/result.csv, result.png, summary.json")
    return 0


def cmd_sweep(args) -> int:
    """Every combination of the ``--set`` lists and seeds, each point a run in its own process,
    cached by the hash of its resolved configuration; the exit status says whether all ran."""
    _import_extensions(args.extensions)
    cfg = config.validate(config.apply_overrides(config.load(args.config), args.overrides))
    out = Path(args.out or "sweeps/" + Path(args.config).stem)
    rows = sweep.sweep(cfg, args.set or [], sweep.parse_seeds(args.seeds), out, jobs=args.jobs,
                 device=args.device, log=None if args.quiet else print)
    failed = [r for r in rows if r.get("status") == "failed"]
    counts = {s: sum(r.get("status") == s for r in rows) for s in ("ran", "cached", "failed")}
    print(f"{len(rows)} points ({', '.join(f'{v} {k}' for k, v in counts.items())}); "
          f"wrote {out}/sweep.csv, sweep.png, runs/")
    if failed:
        print(f"dpnet: {len(failed)} point(s) failed: see the error column of {out}/sweep.csv",
              file=sys.stderr)
        return 1
    return 0


def cmd_privacy(args, extra: list[str]) -> int:
    """The guarantee of an algorithm's parameters: constructor parameters build the algorithm,
    assumption names and the accountant's options go to ``privacy()``, anything else is an
    error listing both (nothing is silently dropped)."""
    _import_extensions(args.extensions)
    params = _parse_params(extra)
    n = positive_int("--agents", params.pop("agents", params.pop("n", 6)))
    d = positive_int("--dim", params.pop("dim", params.pop("d", 10)))
    iterations = params.pop("iterations", None)
    if iterations is not None:
        iterations = positive_int("--iterations", iterations)
    records = params.pop("records_per_agent", None)
    records = None if records is None else positive_int("--records-per-agent", records)
    epochs = params.pop("epochs", None)
    graph_name = params.pop("graph", "ring")
    cls = algorithms.get(args.name)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    constructor_like = {k for k in params if k in accepted or k.startswith("noise")
                        or k in ("decay", "power", "compressor") or k.endswith("_decay")}
    constants = {k: params.pop(k) for k in list(params) if k not in constructor_like}
    options = {o for a in accountants.ACCOUNTANTS.values()
               if a.generic or issubclass(cls, cast(type, a.cls)) for o in a.options}   # cls: not generic
    known = {*accepted, *ASSUMPTIONS, *options, "agents", "dim", "iterations", "graph",
             "records_per_agent", "epochs"}
    for key in constants:
        if key not in known:
            raise UnknownNameError(f"dpnet privacy {args.name} parameter",
                                   f"--{key.replace('_', '-')}",
                                   [f"--{k.replace('_', '-')}" for k in known])
    smooth = float(constants.get("smoothness", float("inf")))
    alg = config.algorithm_from_flags(args.name, params)
    problem = problems.ProblemConstants(n, d, smooth, records_per_agent=records)
    if epochs is not None:
        iterations = _epoch_steps(alg, problem, epochs, iterations)
    graph = graphs.from_spec({"name": graph_name, "n": n})
    if "smoothness" in constants and constants["smoothness"] == float("inf"):
        constants.pop("smoothness")
    # ProblemConstants stands in for a problem (an accountant reads only its constants); the
    # ignore: --graph may name a schedule, which the accountants take though privacy says Graph
    guarantee = alg.privacy(cast(problems.Problem, problem), graph,  # type: ignore[arg-type]
                            iterations=iterations, accountant=args.accountant, **constants)
    print(f"{alg}")
    print(guarantee)
    return 0


def _epoch_steps(alg, problem, epochs, iterations) -> int:
    """``--epochs E``: the steps of E passes over each agent's ``m`` records at the algorithm's
    expected batch, ``ceil(E m / batch)`` (DP-SGD at rate q: ``ceil(E / q)``)."""
    require(iterations is None, "--epochs", epochs, "either --epochs or --iterations, not both")
    e = float(epochs)
    require(0 < e < float("inf"), "--epochs", epochs, "0 < epochs < inf")
    sizes = problem.local_sizes()
    require(sizes is not None, "--epochs", epochs,
            "--records-per-agent M (an epoch is m records)")
    m = int(sizes.max())    # every agent makes E passes over its own records
    batch = alg.records_per_step(problem)
    require(batch is not None, "--epochs", epochs, f"an algorithm that samples a batch "
            f"({alg.name} reads every record at every step: give --iterations)")
    return max(1, math.ceil(e * m / batch - 1e-9))


def cmd_reproduce(args) -> int:
    """``dpnet reproduce NAME ... | all``: run each experiment and write its report ``OUT/NAME.md`` and
    the index, printing each claim's verdict; with ``--plan``, print for each the runs it needs and how
    many are cached, and run nothing. Exit status 0, also when a claim did not reproduce (the reports say
    why)."""
    _import_extensions(args.extensions)
    names = list(reproduce.available()) if args.names == ["all"] else args.names
    if args.plan:
        for name in names:
            spec = reproduce.get(name).spec
            print(f"{name}: " + store.plan(functools.partial(spec.runs, args.quick),
                                     [c.diagnosis for c in spec.checks if c.diagnosis]))
        return 0
    failed = 0
    for name in names:
        exp = reproduce.get(name)
        report = exp.run(quick=args.quick, outdir=args.out, jobs=args.jobs)
        verdicts = ", ".join(c.verdict.value for c in report.claims) or "no claims"
        print(f"{name}: wrote {args.out}/{name}.md ({verdicts})")
        failed += sum(c.passed is False for c in report.claims)
    if names:
        print(f"index: {reproduce.report.write_index(args.out)}")
    if failed:
        print(f"{failed} claim(s) did not reproduce: see the reports (they say why, with numbers)")
    return 0


def cmd_cache(args) -> int:
    """``dpnet cache``: print the run cache's location, counts and size (results, unfinished runs, runs
    computing now, stale locks); ``--prune DAYS`` first removes what has not been used for DAYS days,
    ``--clear`` everything. Exit status 0."""
    if args.prune is not None or args.clear:
        n = store.prune(None if args.clear else args.prune)
        print(f"removed {n} cached run(s) from {store.cache_root()}")
    u = store.cache_usage()
    print(f"{u['root']}: {u['results']} result(s), {u['unfinished']} unfinished run(s), "
          f"{u['running']} computing now (left alone), {u['stale_locks']} stale lock(s) of "
          f"killed runs (--prune 0 removes them), {u['bytes'] / 2 ** 20:.1f} MiB")
    return 0


def _import_extensions(paths: list[str]) -> None:
    """Import each module or ``.py`` file of ``--with`` (:func:`dpnet.registry.import_extensions`:
    worker processes started by spawn import them too)."""
    registry.import_extensions(paths)


def _listed(option: str, text: str | None) -> list[str] | None:
    """A comma-separated option's items (None: not given); an empty item is an error."""
    if text is None:
        return None
    items = [s.strip() for s in text.split(",")]
    if not all(items):
        raise ParameterError(option, text, "a comma-separated list of non-empty items")
    _once(option, text, items)
    return items


def _once(option: str, text: str, items: list) -> None:
    """Each item at most once: a repeated one would run again and count twice (four identical
    rows each claiming four seeds from one)."""
    repeated = sorted({str(v) for v in items if items.count(v) > 1})
    if repeated:
        raise ParameterError(option, text, f"each item at most once ({', '.join(repeated)} "
                             "repeated)")


def _epsilons(text: str | None) -> list[float] | None:
    items = _listed("--epsilons", text)
    if items is None:
        return None
    try:
        values = [float(e) for e in items]
    except ValueError:
        values = []
    if not values or not all(0 < v < float("inf") for v in values):
        raise ParameterError("--epsilons", text, "targets 0 < epsilon < inf, e.g. 0.5,1,2,4")
    assert text is not None                 # _listed gave items: text was given
    _once("--epsilons", text, values)       # 1,1.0 too
    return values


#: what ``compare --quick`` covers without ``--tasks``: the logistic task (a9a), every applicable
#: algorithm, epsilon 1 and 4, 2 trials per method, short horizons, 2 seeds (280 s wall on the
#: quiet machine from an empty cache; the four LIBSVM and synthetic tasks 387 s of CPU beside
#: another job; benchmarks/RESULTS.md)
QUICK_TASKS = ("logistic",)


def cmd_compare(args) -> int:
    """``dpnet compare``: the calibrated privacy-utility leaderboard of the tasks, target epsilons,
    algorithms and seeds selected (defaults: all, or :data:`QUICK_TASKS` and epsilon 1, 4 with
    ``--quick``); writes it to ``--out``, prints each task's ranking, and with ``--audit RUNS`` audits a
    sample of its rows (``--audit-csv``: the rows of a published leaderboard instead).

    Exit status 1 if a row certifies more than its target epsilon or an audited configuration exceeds its
    claim, else 0."""
    report.require_folder("--out", args.out)        # before minutes of work, not after
    _import_extensions(args.extensions)
    tasks = _listed("--tasks", args.tasks) or (list(QUICK_TASKS) if args.quick
                                               else list(compare.TASKS))
    epsilons = _epsilons(args.epsilons) or ([1.0, 4.0] if args.quick else list(compare.EPSILONS))
    algs = _listed("--algorithms", args.algorithms)
    if args.dataset is not None and args.audit_csv is None:
        readers = [t for t in compare.TASKS if compare.task_spec(t).reads_dataset]
        if not set(readers) & set(tasks):
            raise ParameterError("--dataset", args.dataset, f"a task that reads a dataset "
                                 f"({', '.join(readers)}); {', '.join(tasks)} read none")
        if args.dataset not in data.LIBSVM:     # a file of your own, named with its content
            args.dataset = data.libsvm_file_key(args.dataset)
    if args.audit < 0 or (args.audit_per_task is not None and args.audit_per_task < 1):
        raise ParameterError("--audit", args.audit, "a number of runs >= 0 (--audit-per-task "
                             ">= 1)")
    for option, value in (("--audit-every-row", args.audit_every_row),
                          ("--audit-per-task", args.audit_per_task)):
        if value not in (False, None) and not args.audit:
            raise ParameterError(option, value, "an option of --audit RUNS (give RUNS >= 1)")
    if args.audit_csv is not None:
        return _audit_published(args)
    seeds = sweep.parse_seeds(args.seeds) if args.seeds is not None else (
        [0, 1] if args.quick else [0, 1, 2])
    rows = compare.compare(tasks, epsilons, algs, quick=args.quick, seeds=seeds,
                           dataset=args.dataset, jobs=args.jobs, tight=args.tight,
                           publish_start=not args.without_x0, charge_tight=args.charge_tight,
                           log=None)    # the batches' progress: the dpnet.lab logger
    command = "dpnet compare " + " ".join(args.argv)
    audits = None
    if args.audit:
        picked = compare.audit.sample(rows, args.audit_per_task, args.dataset,
                                      args.audit_every_row)
        audits = compare.audit.audit_rows(
            picked, args.dataset, args.audit, args.jobs,
            None if args.quiet else lambda m: print("  audited " + m, flush=True))
    paths = compare.write(rows, args.out, command, args.quick, args.dataset, audits)
    _print_rankings(compare, rows, args.dataset, args.quick)
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    over = [r for r in rows if r["certified_epsilon"] > r["target_epsilon"] * (1 + 1e-9)]
    if over:          # calibration never overshoots; a row that did would be a bug, said loudly
        print(f"ERROR: {len(over)} row(s) certify more than their target epsilon")
        return 1
    return _audit_status(audits or [])


def _audit_published(args) -> int:
    """``dpnet compare --audit-csv CSV --audit RUNS``: audit a published leaderboard's sample
    (``--tasks``, ``--algorithms`` and ``--epsilons`` select its rows)."""
    if args.audit < 1:
        raise ParameterError("--audit", args.audit, "a number of runs >= 1 with --audit-csv")
    tight_given = any(a.split("=")[0] == "--tight" for a in args.argv)   # it has a default
    computing = [(o, v) for o, v, given in (
        ("--quick", True, args.quick), ("--seeds", args.seeds, args.seeds is not None),
        ("--without-x0", True, args.without_x0), ("--tight", args.tight, tight_given),
        ("--charge-tight", True, args.charge_tight))
        if given]
    if computing:
        raise ParameterError(*computing[0], "an option of computing a leaderboard, not of "
                             "--audit-csv (the published rows carry their own)")
    rows = compare.audit.selected(compare.audit.published_rows(args.audit_csv),
                                  tasks=_listed("--tasks", args.tasks),
                                  algorithms=_listed("--algorithms", args.algorithms),
                                  epsilons=_epsilons(args.epsilons))
    picked = compare.audit.sample(rows, args.audit_per_task, args.dataset, args.audit_every_row)
    audits = compare.audit.audit_rows(
        picked, args.dataset, args.audit, args.jobs,
        None if args.quiet else lambda m: print("  audited " + m, flush=True))
    paths = compare.publish.write_audit(audits, args.out, "dpnet compare " + " ".join(args.argv),
                                        args.audit_csv)
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return _audit_status(audits)


def _audit_status(audits: list[dict]) -> int:
    """1, said loudly, where an audited configuration exceeds its claim; else 0."""
    violated = [a for a in audits if a.get("violated")]
    if violated:
        print(f"ERROR: {len(violated)} audited configuration(s) exceed their claim: "
              + ", ".join(f"{a['task']}/{a['algorithm']}" for a in violated))
        return 1
    return 0


def _print_rankings(compare, rows, dataset: str | None, quick: bool) -> None:
    for task in dict.fromkeys(r["task"] for r in rows):
        print(f"\n{task}: {compare.task_spec(task).utility} (lower is better; best first)")
        ref = compare.references(task, dataset, quick)
        print(f"  the start x0 (no learning, no privacy cost): {ref['start']:.3g}; "
              f"noise-free {ref['method']}: {ref['noise_free']:.3g}")
        for eps in sorted({r["target_epsilon"] for r in rows if r["task"] == task}):
            ranked = compare.ranking(rows, task, eps)
            print(f"  epsilon = {eps:g}: " + ", ".join(
                f"{r['algorithm']}[{r['accountant']}] {r['utility']:.3g}"
                + (" (publishes x0)" if r["released"].startswith("the public start") else "")
                for r in ranked))
            worse = [r for r in ranked if r["utility"] > ref["start"]]
            if worse:
                print("    worse than the start x0: " + ", ".join(
                    f"{r['algorithm']}[{r['accountant']}]" for r in worse))
            anchors = compare.ranking(rows, task, eps, "anchor")
            if anchors:
                print("    beside the ranking: " + ", ".join(
                    f"{r['role'].removeprefix('anchor: ')} {r['algorithm']}[{r['accountant']}] "
                    f"{r['utility']:.3g}" for r in anchors))


#: one or two per paper, each family once: Laplace tracking (000), its compressed dual (000),
#: double protection (004), subsampled Gaussian (001) and its dual-averaging baseline, per-step
#: LDP (002); the practitioner's DP-SGD with gossip, and its central ceiling beside the ranking
DEMO_ALGORITHMS = ("diadsp", "ppdc", "dpp2", "doadp", "dp_dda", "ldp_online", "dp_sgd",
                   "dp_sgd_central")


def cmd_demo(args) -> int:
    """The answer to "which algorithm at my epsilon?" on one real dataset, in minutes: the full
    protocol of ``dpnet compare`` (its horizons, its search, its default accountants) on
    mushrooms for :data:`DEMO_ALGORITHMS` and two seeds, so its rows are the full leaderboard's
    rows for those seeds; ``--quick`` (CI) shortens the horizons and the search."""
    argv = [*(["--quick"] if args.quick else []), "--tasks", "logistic", "--dataset",
            "mushrooms", "--algorithms", ",".join(DEMO_ALGORITHMS), "--epsilons", "0.5,1,2,4",
            "--seeds", "0,1", "--tight", "none", "--out", args.out]
    compare_args = make_parser().parse_args(["compare", *argv, "--quiet"])   # every default
    compare_args.argv = argv
    print(f"dpnet demo: {len(DEMO_ALGORITHMS)} private algorithms calibrated to epsilon = 0.5, "
          "1, 2, 4 on mushrooms by their default accountants, tuned and run over 2 seeds "
          f"({'short horizons, ' if args.quick else ''}a few minutes on one core; cached runs "
          "are read back)", flush=True)
    return cmd_compare(compare_args)


def cmd_audit(args) -> int:
    """``dpnet audit``: see :mod:`dpnet.lab.audit.suite`."""
    _import_extensions(args.extensions)
    if not 0 < args.noise_factor < float("inf"):
        raise ParameterError("--noise-factor", args.noise_factor, "0 < factor < inf (1: as "
                             "claimed; below 1 a silent noise reduction the audit should catch)")
    if args.repetitions is not None and args.repetitions < 20:
        raise ParameterError("--repetitions", args.repetitions, "at least 20 runs per input")
    if not 0 < args.confidence < 1:
        raise ParameterError("--confidence", args.confidence, "0 < confidence < 1")
    if args.iterations < 1:
        raise ParameterError("--iterations", args.iterations, "an integer >= 1")
    out = report.require_folder("--out", args.out)
    if args.list:
        print(audit.suite.listing())
        return 0
    if args.attack:
        text, md, png = audit.suite.attack_lab(args.names, args.iterations, args.seed, out)
        print(text)
        print(f"wrote {md} and {png}")
        return 0
    command = "dpnet audit " + " ".join(args.names) + (
        f" --noise-factor {args.noise_factor:g}" if args.noise_factor != 1 else "") + (
        f" --repetitions {args.repetitions}" if args.repetitions else "") + (
        f" --seed {args.seed}" if args.seed else "")
    if args.canary is not None:
        if not 0 < args.canary < float("inf"):
            raise ParameterError("--canary", args.canary, "a target 0 < epsilon < inf")
        if not 0 < args.rate <= 1:
            raise ParameterError("--rate", args.rate, "0 < rate <= 1 (Poisson sampling)")
        if not 0 < args.p <= 1:
            raise ParameterError("--p", args.p, "0 < p <= 1 (node activation probability)")
        minibatch = {"p": args.p, "activation": args.activation, "sampling": args.sampling}
        results, path = audit.suite.canary_audits(
            args.names, args.canary, args.rate, args.iterations, args.repetitions or 20000,
            args.seed, args.confidence, args.noise_factor, out,
            command + f" --canary {args.canary:g} --rate {args.rate:g} --iterations "
            f"{args.iterations}" + (f" --estimator {args.estimator}"
                                    if args.estimator != "clopper-pearson" else "")
            + "".join(f" --{k} {v:g}" if isinstance(v, float) else f" --{k} {v}"
                      for k, v in minibatch.items()
                      if v != audit.suite.MINIBATCH_DEFAULTS[k]),
            args.estimator, minibatch)
        print("\n".join(report.md_table(results)))
        print(f"wrote {path}")
        return 1 if any(r["status"] == "VIOLATED" for r in results) and \
            args.noise_factor == 1 else 0
    audited, summary = audit.suite.audit_targets(
        args.names, out, args.repetitions, args.seed, args.confidence, args.noise_factor,
        command, log=lambda line: print(line, flush=True))
    print(audit.engine.table(audited))
    print(f"wrote {summary} and one NAME.md/NAME.png per target in {out}")
    unexpected = audit.suite.unexpected_violations(audited, args.noise_factor)
    if unexpected:
        print("dpnet: audited epsilon above the claim for " + ", ".join(unexpected)
              + ": a bug in the code or the accounting", file=sys.stderr)
        return 1
    return 0


# -- entry -----------------------------------------------------------------------------------


def _with_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--with", dest="extensions", action="append", default=[],
                        metavar="MODULE", help=f"a module or .py file to import first, which "
                        f"registers its own {what}; repeatable")


def make_parser() -> argparse.ArgumentParser:
    """The ``dpnet`` argument parser: one subcommand per ``cmd_*`` function, which each subparser sets as
    ``func``."""
    p = argparse.ArgumentParser(prog="dpnet", description="Differentially private decentralized "
                                "optimization: run algorithms, account privacy, reproduce papers.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("list", help="list algorithms, graphs, compressors, problems, experiments")
    s.add_argument("what", nargs="?", choices=["algorithms", "graphs", "compressors", "problems",
                                               "partitioners", "tasks", "experiments",
                                               "accountants"])
    _with_option(s, "algorithms, graphs, problems or experiments to list beside dpnet's")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("run", help="run a TOML configuration")
    s.add_argument("config")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="override a value of the configuration by its dotted key, e.g. "
                        "algorithm.eta=0.2 iterations=500 (values parsed as literals)")
    s.add_argument("--out", help="output folder (default runs/<config name>)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--device", default=None,
                   help="torch device of the run: cpu, cuda, cuda:1, ... (default: the "
                        "configuration's device, else cpu); results come back on the CPU")
    s.add_argument("--backend", choices=["simulated", "distributed"], default="simulated",
                   help="distributed: agents spread over the processes of torchrun "
                   "(torchrun --nproc-per-node N -m dpnet.cli run CONFIG --backend distributed)")
    _with_option(s, "algorithms, graphs or partitioners the configuration names (a "
                 "configuration may also name a class or factory by import path, "
                 "\"package.module:name\")")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("sweep", help="run a configuration over a grid of values and seeds",
                       description="Runs every combination of the --set value lists and the "
                       "seeds, each in its own process, under OUT/runs/<config hash>/ (a point "
                       "already there is not rerun); writes OUT/sweep.csv and OUT/sweep.png. "
                       "Exit status 1 if any point failed.")
    s.add_argument("config")
    s.add_argument("overrides", nargs="*", metavar="key=value",
                   help="fixed overrides applied to every point, e.g. iterations=200")
    s.add_argument("--set", action="append", metavar="key=v1,v2,...",
                   help="a dotted key and its comma-separated values (repeatable), e.g. "
                        "--set algorithm.eta=0.05,0.1,0.2")
    s.add_argument("--seeds", default="0", help="seeds as a range 0-4 or a list 0,2,7 "
                   "(default 0)")
    s.add_argument("--jobs", type=int, default=1, help="worker processes (default 1: in-process)")
    s.add_argument("--out", help="output folder (default sweeps/<config name>)")
    s.add_argument("--device", default=None, help="torch device of every run (default: the "
                   "configuration's, else cpu)")
    s.add_argument("--quiet", action="store_true", help="no line per point")
    _with_option(s, "algorithms, graphs or partitioners the configuration names (worker "
                 "processes are forked with them; under spawn, name them by import path)")
    s.set_defaults(func=cmd_sweep)
    s = sub.add_parser("privacy", help="print an algorithm's privacy guarantee",
                       description="dpnet privacy NAME --param value ...: hyper-parameters as in "
                       "the paper; noise scales as numbers with --decay q (geometric) or --power; "
                       "--iterations K (omit for an infinite-horizon result), --gradient-bound M, "
                       "--adjacency-radius R (the papers' delta of the function relation), "
                       "--smoothness L, --delta, --dim d, --agents n, "
                       "--accountant NAME and its options (e.g. --variant).")
    s.add_argument("name")
    s.add_argument("--accountant", default=None,
                   help="accountant by name (dpnet list accountants; default: the algorithm's)")
    _with_option(s, "algorithms (the NAME may also be an import path package.module:Class)")
    s.set_defaults(func=cmd_privacy, takes_extra=True)
    s = sub.add_parser("demo", help="the main job: which private algorithm is best at each "
                       "epsilon, on the mushrooms dataset (dpnet compare's protocol)")
    s.add_argument("--out", default="demo-output")
    s.add_argument("--quick", action="store_true", help="short horizons and search (CI)")
    s.set_defaults(func=cmd_demo)
    s = sub.add_parser("compare", help="calibrated privacy-utility leaderboard of the private "
                       "algorithms (each calibrated to every target epsilon and tuned the same "
                       "way)")
    s.add_argument("--tasks", default=None, help="comma-separated subset of the tasks (default: "
                   "all; `dpnet list tasks` names them)")
    s.add_argument("--epsilons", default=None, help="targets, e.g. 0.5,1,2,4 (default: those; "
                   "1,4 with --quick)")
    s.add_argument("--algorithms", default=None, help="comma-separated subset (default: all "
                   "benchmarked)")
    s.add_argument("--seeds", default=None, help="reported seeds, e.g. 0-2 (default 0-2; 0,1 "
                   "with --quick)")
    s.add_argument("--dataset", default=None, help="LIBSVM dataset of the logistic task "
                   "(default a9a)")
    s.add_argument("--tight", default="entry", choices=("entry", "rdp", "pld", "none"),
                   help="accountant of the second row (default: the tightest per algorithm)")
    s.add_argument("--without-x0", action="store_true",
                   help="rank every method's best tuned run even where publishing the public "
                        "start x0 (K = 0) does better on validation (the papers' protocol)")
    s.add_argument("--charge-tight", action="store_true",
                   help="the tuning charge (epsilon_with_tuning) of the second rows too: every "
                        "configuration calibrated under their accountant (about 8x those "
                        "calibrations; without it those rows show none)")
    s.add_argument("--quick", action="store_true", help="short horizons, 2 trials per method, "
                   "epsilon 1 and 4, 2 seeds; without --tasks the logistic task only")
    s.add_argument("--audit", type=int, default=0, metavar="RUNS",
                   help="audit the calibrated configurations with RUNS runs per adjacent "
                   "dataset, e.g. 4000 (default 0: no audit): every row the canary audit covers, "
                   "and each other algorithm's smallest-epsilon row per task (all of them with "
                   "--audit-every-row); exit status 1 if any exceeds its claim")
    s.add_argument("--audit-every-row", action="store_true",
                   help="with --audit: audit every row that releases more than x0, at every "
                   "epsilon and accountant")
    s.add_argument("--audit-per-task", type=int, default=None, metavar="N",
                   help="at most N audited algorithms per task (default: every one)")
    s.add_argument("--audit-csv", default=None, metavar="CSV",
                   help="audit the rows of a published leaderboard.csv instead of computing a "
                   "leaderboard (with --audit RUNS; writes audit.md and audit.csv)")
    _with_option(s, "benchmark entries or tasks (dpnet.lab.compare.entries.register)")
    s.add_argument("--jobs", type=int, default=1)
    s.add_argument("--quiet", "--silent", dest="quiet", action="store_true",
                   help="no line per run (--silent: the same, its former name)")
    s.add_argument("--out", default="leaderboard")
    s.set_defaults(func=cmd_compare)
    s = sub.add_parser("reproduce", help="regenerate a paper figure/table with its claims checked")
    s.add_argument("names", nargs="+", help="experiment names (dpnet list experiments) or all")
    s.add_argument("--quick", action="store_true", help="short horizons, few seeds")
    _with_option(s, "experiment specs (dpnet.lab.reproduce.register, as examples/new_figure.py)")
    s.add_argument("--plan", action="store_true", help="count the runs, how many are cached "
                   "and at most how many counterfactual runs may follow; run nothing")
    s.add_argument("--out", default="reproductions")
    s.add_argument("--jobs", type=int, default=1,
                   help="worker processes for the runs (cached under $DPNET_RUNS, default "
                        "~/.cache/dpnet/runs: an interrupted reproduction resumes run by run)")
    s.set_defaults(func=cmd_reproduce)
    s = sub.add_parser("cache", help="the run cache of reproduce and compare ($DPNET_RUNS): its "
                       "size, and removal of what has not been used")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--prune", type=float, metavar="DAYS",
                   help="remove results and unfinished runs not used for DAYS days")
    g.add_argument("--clear", action="store_true", help="remove everything")
    s.set_defaults(func=cmd_cache)
    s = sub.add_parser(
        "audit", help="empirical privacy audit (lower bound on epsilon vs the claim) or the "
        "eavesdropper's attack lab",
        description="dpnet audit NAME [NAME ...] | all: run each registered target on its two "
        "adjacent inputs, report the audited lower bound on epsilon against the claimed one "
        "(NAME.md, NAME.png, and audit.md with the table). dpnet audit --attack [SCENARIO ...] "
        "| all: reconstruct gradients and states from transcripts (attacks.md, attacks.png). "
        "dpnet audit --list: the targets and scenarios.")
    s.add_argument("names", nargs="*", help="audit targets (or attack scenarios with --attack); "
                   "'all' for every available one")
    s.add_argument("--attack", action="store_true", help="run the eavesdropper lab instead")
    s.add_argument("--list", action="store_true", help="list targets and attack scenarios")
    s.add_argument("--repetitions", type=int, default=None,
                   help="runs per input (default: the target's own)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--confidence", type=float, default=0.95)
    s.add_argument("--noise-factor", type=float, default=1.0,
                   help="silently scale the noise (mutation check; the claim stays the original)")
    s.add_argument("--iterations", type=int, default=40, help="horizon of the attack scenarios "
                   "and of --canary")
    s.add_argument("--canary", type=float, default=None, metavar="EPSILON",
                   help="white-box canary audit of dp_sgd, decor, doadp and dp_dda (NAMES, "
                   "default all) calibrated to EPSILON (delta 1e-5, PLD) on the 10-agent circulant graph; "
                   "the GDP estimate beside the bound, and the power")
    s.add_argument("--rate", type=float, default=64 / 1953,
                   help="sampling rate of --canary: Poisson for dp_sgd and decor, a fixed "
                   "batch of rate x m of m = 1953 records for doadp and dp_dda (default "
                   "64/1953, the a9a task's)")
    s.add_argument("--p", type=float, default=1.0, help="node activation probability of "
                   "doadp and dp_dda in --canary (default 1)")
    s.add_argument("--activation", choices=("visible", "hidden"), default="visible",
                   help="how --canary's accountant of doadp and dp_dda treats activation when "
                   "p < 1: visible (sound: who sends is seen) or hidden (the paper's Lemma 4, "
                   "which under-reports against an eavesdropper; the audit reports it)")
    s.add_argument("--sampling", choices=("fixed", "poisson"), default="fixed",
                   help="the batch sampler of doadp and dp_dda in --canary (default fixed)")
    s.add_argument("--estimator", choices=audit.canary.ESTIMATORS, default="clopper-pearson",
                   help="the lower bound that decides a --canary audit (the other is reported "
                   "beside it): the Clopper-Pearson threshold test, or the one-run test "
                   "(Steinke et al. 2023) of the same runs read as canaries of one run")
    s.add_argument("--out", default="audits", help="output folder (default: audits)")
    _with_option(s, "audit targets (dpnet.lab.audit.targets.register)")
    s.set_defaults(func=cmd_audit)
    return p


#: errors of a run that started and failed (it diverged, a file was damaged, a peer died), not of
#: what was asked: they exit 1, a usage error 2 (as argparse's own)
RUN_FAILURES = (NonFiniteError, data.DataError, distributed.DistributedError)


def exit_status(err: DPNetError) -> int:
    """1 for a run that failed (:data:`RUN_FAILURES`), 2 for a usage error."""
    return 1 if isinstance(err, RUN_FAILURES) else 2


#: the command line's view of dpnet's log records (a long run's progress lines) on stderr
_STDERR = logging.StreamHandler()
_STDERR.setFormatter(logging.Formatter("dpnet: %(message)s"))


def _show_logs(on: bool) -> None:
    """dpnet's INFO records to stderr (once per process), or none with ``--quiet``."""
    root = logging.getLogger("dpnet")
    if _STDERR not in root.handlers:
        root.addHandler(_STDERR)
    _STDERR.stream = sys.stderr                 # the current one (tests capture it per call)
    root.setLevel(logging.INFO if on else logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dpnet`` command: parse ``argv`` (default ``sys.argv[1:]``) and run the
    subcommand, returning its exit status.

    A :class:`~dpnet.errors.DPNetError` is printed as one ``dpnet: error:`` line and exits with
    :func:`exit_status` (1 for a run that failed, 2 for a usage error); a closed output pipe exits 141 and
    an interrupt 130 (finished runs stay cached). Unknown arguments are a usage error, except
    ``key=value`` words after the options of a command that takes overrides, which are overrides."""
    parser = make_parser()
    parser.add_argument("--version", action="version", version=f"dpnet {__version__}")
    args, extra = parser.parse_known_args(argv)
    args.argv = list(sys.argv[2:] if argv is None else argv[1:])
    _show_logs(not getattr(args, "quiet", False))
    try:
        if getattr(args, "takes_extra", False):
            return args.func(args, extra)
        if hasattr(args, "overrides"):
            # key=value overrides may follow the options (argparse stops the positional at the
            # first option): the leftover key=value words are overrides too
            args.overrides += [w for w in extra if "=" in w and not w.startswith("-")]
            extra = [w for w in extra if w not in args.overrides]
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return args.func(args)
    except DPNetError as err:
        print(f"dpnet: error: {err}", file=sys.stderr)
        return exit_status(err)
    except BrokenPipeError:
        # the reader left (`dpnet ... | head`): what it read is all it wanted; stdout is
        # pointed at devnull so the interpreter's final flush does not raise a second time
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141   # the shell's status for a process ended by SIGPIPE
    except KeyboardInterrupt:
        # the store ended its workers; what finished is cached, nothing half-written counts
        print("dpnet: interrupted; finished runs are kept in the run cache, rerun to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
