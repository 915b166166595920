"""The leaderboard's files: ``leaderboard.csv``, ``leaderboard.md``, one ``utility-<task>.png``
per task, and the audit section when configurations were audited."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from .. import report
from . import audit, entries
from .entries import DELTA, ENTRIES, GRID_TRIALS, QUICK_TRIALS, entry
from .leaderboard import COLUMNS, UNRANKED, references
from .tasks import RELATION, build, task_spec


def write(rows: list[dict], out: str | Path, command: str, quick: bool,
          dataset: str | None = None, audits: list[dict] | None = None) -> dict[str, Path]:
    """``leaderboard.csv``, ``leaderboard.md`` and one ``utility-<task>.png`` per task (and
    ``audit.csv`` with the audit section in ``leaderboard.md`` when ``audits`` are given)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "leaderboard.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.6g}" if isinstance(r.get(k), float) else r.get(k, ""))
                        for k in COLUMNS})
    paths = {"csv": out / "leaderboard.csv"}
    refs = {task: references(task, dataset, quick) for task in dict.fromkeys(
        r["task"] for r in rows)}
    for task, ref in refs.items():
        paths[f"png-{task}"] = _plot([r for r in rows if r["task"] == task], task,
                                     out / f"utility-{task}.png", ref)
    text = markdown(rows, command, quick, dataset, refs)
    if audits:
        paths["audit"] = _audit_csv(audits, out)
        text += "\n" + audit.markdown(audits)
    (out / "leaderboard.md").write_text(text)
    paths["md"] = out / "leaderboard.md"
    return paths


def _audit_csv(audits: list[dict], out: Path) -> Path:
    with (out / "audit.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for a in audits for k in a)))
        w.writeheader()
        w.writerows(audits)
    return out / "audit.csv"


def write_audit(audits: list[dict], out: str | Path, command: str,
                source: str) -> dict[str, Path]:
    """``audit.csv`` and ``audit.md`` of a published leaderboard's audit (``source``: its CSV)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "audit.md"
    md.write_text(f"# Audit of {source}\n\nRegenerate: `{command}`\n\n" + audit.markdown(audits))
    return {"audit": _audit_csv(audits, out), "md": md}


def epsilons_of(rows: list[dict], task: str) -> list[float]:
    """The target epsilons of ``task``'s rows, each once, ascending."""
    return sorted({r["target_epsilon"] for r in rows if r["task"] == task})


def ranking(rows: list[dict], task: str, eps: float, role: str = "ranked") -> list[dict]:
    """The rows of ``task`` at ``eps`` that are ranked (``role="anchor"``: the anchors instead),
    best first."""
    sel = [r for r in rows if r["task"] == task and r["target_epsilon"] == eps
           and not r["status"].startswith(UNRANKED)
           and (r.get("role", "ranked") == "ranked") == (role == "ranked")]
    return sorted(sel, key=lambda r: (r["utility"], r["algorithm"], r["accountant"]))


def _charge(row: dict) -> str:
    """A row's ``epsilon_with_tuning`` as the table shows it ("none" where not computed)."""
    value = float(row.get("epsilon_with_tuning", math.nan))
    return f"{value:.3g}" if math.isfinite(value) or value == math.inf else "none"


def _budget(rows: list[dict], quick: bool) -> str:
    """The per-method search size of the tasks in ``rows`` (one number where they agree)."""
    sizes = sorted({QUICK_TRIALS if quick else GRID_TRIALS * len(task_spec(r["task"]).horizons)
                    for r in rows})
    return " or ".join(str(s) for s in sizes) + (" (by task)" if len(sizes) > 1 else "")


def markdown(rows: list[dict], command: str, quick: bool, dataset: str | None = None,
             refs: dict[str, dict] | None = None) -> str:
    """The leaderboard page (``leaderboard.md``) of ``rows``: the protocol (the relation, what is private
    and what is ranked, the tuning, the two epsilons per row), then per task its relation, privacy unit
    and threat models, its notes, the scale of its utility (the start x0 and the noise-free reference:
    ``refs[task]``, else :func:`references`), the entries not applicable or refused, and per target
    epsilon the ranked table and the anchors; last, each entry's mapping of its theorem onto the relation
    and the private algorithms left out. ``command`` regenerates it (its ``--without-x0`` and
    ``--charge-tight`` change the wording); ``quick``: a ``--quick`` run's page."""
    lines = ["# Privacy-utility leaderboard", "",
             f"Regenerate: `{command}`" + (f" (quick: short horizons, {QUICK_TRIALS} trials per method)"
                                           if quick else ""), "",
             "**Neighbouring relation:** one per task (stated under each task; for the "
             f"finite-sum tasks: {RELATION}). Each algorithm's guarantee is expressed under it "
             "through its mechanism's sensitivity (mapping per algorithm below). Pure-epsilon "
             f"and (epsilon, delta) rows share the epsilon axis at delta = {DELTA:g}.", "",
             "**What is private, and what is ranked:** every guarantee covers the messages "
             "the agents exchange (the papers' eavesdropper; an anchor: its iterates). Each row "
             "ranks the model its algorithm publishes, a function of what that guarantee "
             "covers (column *released*): the agents' last noisy broadcasts where the internal "
             "state holds clean gradients (the Laplace methods, the online and directed ones), "
             "the public copies or the states where those are post-processings of the charged "
             "releases (DO-ADP, DP-DDA, DP-SGD). Column *state utility*: the same metric on the "
             "average of the internal states, which is not covered where the two differ.", "",
             f"**Tuning:** a random search over {_budget(rows, quick)} configurations per "
             "method (each trial of its own grid: a step size with a noise decay, or with the "
             "batch for the methods that sample, at each horizon of the task: fractions of K; "
             "the choice column names the K run), each calibrated to the target at its own "
             "horizon and batch under the default accountant. The number of trials is drawn "
             "from Papernot & Steinke's truncated negative binomial with that many trials on "
             "average, each trial a configuration drawn uniformly with its own seed; the best "
             "on a validation estimate of the ranked utility (the regularised objective's "
             "suboptimality on the validation set, held out of every agent's data; the "
             "validation gradient norm or error rate where that is the metric) is chosen, then "
             "run with the reported seeds on the test split; the tightest-accountant row "
             "re-calibrates the same choice. "
             + ("Every method's best tuned run is ranked, also where the public start x0 does "
                "better (--without-x0, the papers' protocol). " if "--without-x0" in command else
                "Publishing the public start x0 (K = 0, epsilon 0) is always a candidate: a "
                "method whose best trial does not beat it on validation publishes x0 (a row "
                "that beat it on validation can still end above it on the test split). "), "",
             "**Two epsilons per row:** *certified eps* is one run's guarantee (every run of "
             "the search and every reported seed meets the target on its own): rows are ranked "
             "at it, as in the papers. *eps with tuning* charges what the row publishes: the "
             "search's choice (Papernot & Steinke 2022, Theorem 2, in Renyi DP from each "
             "configuration's curve; for pure-epsilon trials, (2 + eta) eps where smaller) "
             "composed with its reported seeds' runs, at the same delta. It covers the row, not "
             "the search's log (the number of trials and the other trials' scores stay "
             "secret), and not the rows of other epsilons or accountants. "
             + ("" if "--charge-tight" in command else "The tightest-accountant rows show "
                "none: their runs' curve is the largest over every configuration the search "
                "may choose, each calibrated under that accountant (--charge-tight computes "
                "it). ") + "It can be below *certified eps* where a row's accountant is loose: "
             "its noise, read by a tighter curve, costs less than that accountant says.", ""]
    for task in dict.fromkeys(r["task"] for r in rows):
        t = build(task, dataset)
        ref = (refs or {}).get(task) or references(task, dataset, quick)
        threats = sorted({r["threat_model"] for r in rows if r["task"] == task})
        lines += [f"## {task}: {t.spec.title}", "", f"**Relation:** {t.spec.relation}.", "",
                  f"**Privacy unit:** {t.spec.privacy_unit}. **Threat model:** "
                  f"{'; '.join(threats)} (every row; per row in the CSV).", "",
                  *(f"- {n}" for n in t.notes), *([""] if t.notes else []),
                  f"Ranked by {t.spec.utility} (lower is "
                  f"better), mean ± std over seeds, after K = {ref['iterations']} iterations "
                  f"from the public start x0. Plot: `utility-{task}.png`.", "",
                  f"For scale: the start x0 has utility {ref['start']:.3e}; noise-free "
                  f"{ref['method']} at the same K reaches "
                  f"{ref['noise_free']:.3e} (test accuracy {ref['accuracy']:.4f}). A private row "
                  "above the start has not learned anything at that epsilon.", ""]
        lines += [f"Not applicable to this task: **{r['algorithm']}**, "
                  f"{r['status'].removeprefix('not applicable: ')}." for r in rows
                  if r["task"] == task and r["status"].startswith("not applicable")
                  and r["target_epsilon"] == min(epsilons_of(rows, task))]
        lines += [f"Refused by its accountant: **{r['algorithm']}** ({r['accountant']}) at "
                  f"epsilon = {r['target_epsilon']:g}: {r['status'].removeprefix('refused: ')}"
                  for r in rows if r["task"] == task and r["status"].startswith("refused")]
        lines += [""] if lines[-1] != "" else []
        for eps in epsilons_of(rows, task):
            ranked = ranking(rows, task, eps)
            win = ranked[0]
            lines += [f"### epsilon = {eps:g}: winner {win['algorithm']} ({win['accountant']})",
                      ""]
            lines += report.md_table([
                {"rank": i, "algorithm": r["algorithm"], "accountant": r["accountant"],
                 "certified eps": f"{r['certified_epsilon']:.4g}",
                 "eps with tuning": _charge(r),
                 "utility": f"{r['utility']:.3e} ± {r['utility_std']:.1e}",
                 "accuracy": f"{r['accuracy']:.4f}", "bits/agent": f"{r['bits_per_agent']:.3g}",
                 "s/run": f"{r['seconds']:.2f}", "choice": r["choice"],
                 "state utility": f"{float(r.get('state_utility', math.nan)):.3e}",
                 "status": r["status"]}
                for i, r in enumerate(ranked, 1)])
            anchors = ranking(rows, task, eps, "anchor")
            if anchors:
                lines += ["", "Anchors, not ranked (another threat model or no collaboration): "
                          + "; ".join(f"{r['role'].removeprefix('anchor: ')} {r['algorithm']} "
                                      f"({r['accountant']}) {r['utility']:.3e}, choice "
                                      f"{r['choice']}" for r in anchors) + "."]
            lines.append("")
    lines += ["## Mapping of each algorithm's theorem onto the relation", ""]
    lines += [f"- **{e.name}** ({e.default}; tightest: {e.tight or e.default}): {e.mapping}"
              for e in ENTRIES.values()]
    lines += ["", "## Private algorithms left out, and why", ""]
    lines += [f"- **{n}**: {why}" for n, why in entries.left_out().items()]
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict], task: str, path: Path, ref: dict | None = None) -> Path:

    fig, ax = report.figure(figsize=(9, 4.8))
    ran = [r for r in rows if math.isfinite(float(r["utility"]))]
    names = list(dict.fromkeys(r["algorithm"] for r in ran))
    colours = report.colormap("tab20")
    for (alg, acc) in dict.fromkeys((r["algorithm"], r["accountant"]) for r in ran):
        sel = sorted((r for r in ran if r["algorithm"] == alg and r["accountant"] == acc),
                     key=lambda r: r["target_epsilon"])
        eps = np.array([r["target_epsilon"] for r in sel])
        u = np.array([r["utility"] for r in sel], dtype=float)
        s = np.nan_to_num(np.array([r["utility_std"] for r in sel], dtype=float))
        colour = colours(names.index(alg) % 20)
        ax.loglog(eps, u, "o-" if acc == entry(alg).default else "s--", color=colour,
                  label=f"{alg} ({acc})")
        ax.fill_between(eps, np.maximum(u - s, u * 1e-3), u + s, color=colour, alpha=0.15)
    if ref:   # the scale every row is read on: not moving, and the same K without privacy
        ax.axhline(ref["start"], color="black", lw=1, ls=":", label="start x0")
        if math.isfinite(ref["noise_free"]):
            ax.axhline(ref["noise_free"], color="grey", lw=1, ls="-.", label="noise-free")
    ax.set(xlabel="target epsilon (delta = 1e-5 for (eps, delta) rows)",
           ylabel=task_spec(task).utility, title=f"{task}: utility against epsilon "
           "(solid: default accountant, dashed: tightest)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path
