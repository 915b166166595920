"""``dpnet audit``'s work: audit registered targets and write their reports and the summary table;
or run the eavesdropper lab. The command line only parses and prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ... import graphs
from ...algorithms.decor import DECOR
from ...algorithms.doadp import DOADP
from ...algorithms.dp_sgd import DPSGD
from ...algorithms.dpdda import DPDDA
from ...errors import ParameterError
from .. import report
from . import attacks, canary
from .engine import (
    TARGETS,
    AuditResult,
    LinearRecords,
    audit,
    available_targets,
    silently_scaled,
    table,
    write_report,
)


def listing() -> str:
    """The targets (with what each needs or documents) and the attack scenarios."""
    lines = []
    for name, t in TARGETS.items():
        flag = "" if t.available else f"  [needs {t.requires}]"
        known = "  [documents an accounting failure]" if t.expected_violation else ""
        lines.append(f"{name}{flag}{known}\n    {t.note}")
    lines.append("attack scenarios: " + ", ".join(attacks.SCENARIOS))
    return "\n".join(lines)


def attack_lab(names: Sequence[str], iterations: int, seed: int, out: Path) -> tuple[str, Path, Path]:
    """(table, markdown, png) of the reconstruction scenarios ``names`` (empty: all)."""
    chosen = "all" if not names or list(names) == ["all"] else list(names)
    results = attacks.lab(chosen, iterations=iterations, seed=seed)
    md, png = attacks.write_lab_report(results, out)
    return attacks.lab_table(results), md, png


def audit_targets(names: Sequence[str], out: Path, repetitions: int | None, seed: int,
                  confidence: float, noise_factor: float, command: str,
                  log: Callable[[str], None] = lambda line: None) -> tuple[list[AuditResult], Path]:
    """Audit each target (``["all"]``: every available one), write ``NAME.md``/``NAME.png`` per
    target and ``audit.md`` with the table; returns the results and the summary's path."""
    if not names:
        raise ParameterError("names", None, "audit target names or 'all' (dpnet audit --list)")
    chosen = available_targets() if list(names) == ["all"] else list(names)
    results = []
    for name in chosen:
        r = audit(name, repetitions=repetitions, seed=seed, confidence=confidence,
                  noise_factor=noise_factor)
        write_report(r, out)
        results.append(r)
        log(f"{name}: audited eps >= {r.epsilon:.4g}, claimed {r.claimed:.4g} "
            f"({'VIOLATION' if r.violated else 'ok'}, {r.wall_time:.1f} s)")
    summary = out / "audit.md"
    notes = [f"- {r.name}: {TARGETS[r.name].expected_violation or TARGETS[r.name].note}"
             for r in results]
    summary.write_text("\n".join(["# Privacy audits", "", f"Regenerate: `{command}`", "",
                                  f"Lower bounds hold with {confidence:.0%} confidence each.",
                                  "", table(results), "", *notes, ""]))
    return results, summary


#: what ``dpnet audit --canary`` audits (KangWDDP, federated and unclipped, only from Python)
CANARY_ALGORITHMS = ("dp_sgd", "decor", "doadp", "dp_dda")
#: records per agent of the DO-ADP / DP-DDA canary configurations (the a9a task's m)
CANARY_RECORDS = 1953


#: ``dpnet audit --canary``'s options of DO-ADP and DP-DDA: node activation probability p,
#: how the accountant treats activation, the batch's sampler
MINIBATCH_DEFAULTS = {"p": 1.0, "activation": "visible", "sampling": "fixed"}


def _canary_unit(name: str, rate: float, p: float = 1.0, sampling: str = "fixed"):
    """The unit-noise configuration ``dpnet audit --canary`` calibrates, and its accountant."""
    if name in ("dp_sgd", "decor"):
        return (DPSGD(1.0, 1.0, rate=rate) if name == "dp_sgd" else
                DECOR(1.0, 1.0, 3.0, rate=rate)), "pld"
    batch = max(1, round(rate * CANARY_RECORDS))
    return (DOADP(0.1, 0.5, 0.0, sigma=1.0, p=p, clip=1.0, batch_size=batch,
                  sampling=sampling)
            if name == "doadp" else
            DPDDA(1.0, sigma=1.0, p=p, clip=1.0, batch_size=batch,
                  sampling=sampling)), "pld"


def calibrated_noise(alg) -> str:
    """The noise scales a calibration chose (``sigma=0.61``): the audited configuration's
    noise, which tells the accountants apart where the claims are equal by calibration."""
    return ", ".join(f"{a}={getattr(getattr(alg, a), 'scale', getattr(alg, a)):.4g}"
                     for a in alg.noise_attributes if not a.startswith("_"))


def canary_audits(names: Sequence[str], epsilon: float, rate: float, iterations: int,
                  runs: int, seed: int, confidence: float, noise_factor: float, out: Path,
                  command: str, estimator: str = "clopper-pearson",
                  minibatch: dict | None = None) -> tuple[list[dict], Path]:
    """Canary audits (:mod:`.canary`) on the 10-agent circulant graph, each configuration
    calibrated to ``epsilon`` at delta = 1e-5 by PLD over ``iterations`` steps: DP-SGD and
    DECOR (``z_cor = 3 z_cdp``) at Poisson rate ``rate``, DO-ADP and DP-DDA with a batch of
    ``rate m`` of m = :data:`CANARY_RECORDS` records (fixed, or Poisson with
    ``minibatch["sampling"]``), clipped in l2 at 1; ``noise_factor``
    silently scales the noise (the claim unchanged); ``estimator``: the lower bound that decides
    (the other is reported beside it); ``minibatch``: DO-ADP's and DP-DDA's options of
    :data:`MINIBATCH_DEFAULTS` (``activation="hidden"`` is the paper's Lemma 4, the accounting
    fault the audit reports against an eavesdropper when p < 1). Writes ``canary.md``; returns
    the results and its path."""
    chosen = list(CANARY_ALGORITHMS) if not names or list(names) == ["all"] else list(names)
    for name in chosen:
        if name not in CANARY_ALGORITHMS:
            raise ParameterError("names", name, f"one of {CANARY_ALGORITHMS} with --canary")
    options = {**MINIBATCH_DEFAULTS, **(minibatch or {})}
    changed = {k for k, v in options.items() if v != MINIBATCH_DEFAULTS[k]}
    if changed and not {"doadp", "dp_dda"} & set(chosen):
        raise ParameterError(f"--{sorted(changed)[0]}", options[sorted(changed)[0]],
                             "an option of doadp and dp_dda only (name one of them)")
    graph = graphs.circulant(10, offsets=(1, 2))
    results, cp = [], estimator == "clopper-pearson"
    for name in chosen:
        minibatch_method = name in ("doadp", "dp_dda")
        unit, accountant = (_canary_unit(name, rate, options["p"], options["sampling"])
                            if minibatch_method else _canary_unit(name, rate))
        m = CANARY_RECORDS if minibatch_method else 100
        records = LinearRecords(np.zeros((graph.n, m, 1)))
        constants = ({"gradient_bound": 1.0, "activation": options["activation"]}
                     if minibatch_method else {})
        alg = unit.calibrate(epsilon, records, graph, iterations, delta=1e-5,
                             accountant=accountant, **constants)

        def profile(delta: float, alg=alg, records=records, accountant=accountant,
                    constants=constants) -> float:
            return alg.privacy(records, graph, iterations, delta=delta, accountant=accountant,
                               **constants).epsilon

        claim = profile(1e-5)
        ran = alg if noise_factor == 1 else silently_scaled(alg, noise_factor)
        a = canary.audit(ran, graph, iterations, claim, 1e-5, runs, seed, confidence,
                         power=noise_factor == 1, records=m, profile=profile,
                         estimator=estimator)
        results.append({"algorithm": name + "".join(
                            f", {k}={v:g}" if isinstance(v, float) else f", {k}={v}"
                            for k, v in options.items() if minibatch_method and k in changed),
                        "noise factor": f"x{noise_factor:g}",
                        "K": iterations, "rate": f"{rate:.4g}", "runs/world": runs,
                        "claimed eps": f"{claim:.4g}",
                        "calibrated noise": calibrated_noise(alg),
                        "CP lower bound": f"{a['lower_bound' if cp else 'other_bound']:.4g}",
                        "one-run lower bound": f"{a['other_bound' if cp else 'lower_bound']:.4g}",
                        "GDP estimate": f"{a['gdp_estimate']:.4g}",
                        "ratio": f"{a['ratio']:.2f}",
                        "profile (closest)": canary.closest_text(a["closest"]),
                        "caught": (f"x{a['caught_at']:g}" if a["caught_at"] else
                                   "-" if noise_factor != 1 else "not down to x0.3"),
                        "status": "VIOLATED" if a["violated"] else "within claim",
                        "seconds": f"{a['seconds']:.1f}"})
    path = out / "canary.md"
    path.write_text("\n".join(["# Canary audits", "", f"Regenerate: `{command}`", "",
                               "White-box, Dirac gradient canary, exact likelihood-ratio score "
                               "(docs/auditing.md); lower bounds hold with "
                               f"{confidence:.0%} confidence (the {estimator} bound decides), "
                               "the GDP fit is an estimate.", "",
                               *report.md_table(results), ""]))
    return results, path


def unexpected_violations(results: Sequence[AuditResult], noise_factor: float) -> list[str]:
    """Targets whose audited bound exceeds an unmutated claim that no finding documents."""
    return [r.name for r in results if r.violated and noise_factor == 1
            and not TARGETS[r.name].expected_violation]
