"""``dpnet compare``: which private algorithm gives the best model at my epsilon?

For each task (:mod:`.tasks`) and each target epsilon, every benchmarked algorithm
(:mod:`.entries`) is calibrated to the target by its default (sound) accountant and run; a second
row re-calibrates the tuned configuration with the tightest accountant dpnet has for it (PLD for
Laplace and Gaussian releases) where that differs. Pure-epsilon and (epsilon, delta) guarantees
share the epsilon axis at delta = 1e-5 (pure epsilon is (epsilon, 0)).

Tuning protocol, the same for every method (:mod:`.tuning`): a random search (Papernot &
Steinke 2022) over its configurations (:meth:`~.entries.Entry.search`: each trial of its grid, a
step size with a noise decay or a batch size, at each of the task's horizons), each calibrated to
the target at its own horizon: K trials, K drawn from a truncated negative binomial whose mean is
the number of configurations, each trial a configuration drawn uniformly and run once (seeds 100,
101, ...) on the training data, scored on the held-out validation split by the ranked utility;
the best one is then run with ``seeds`` (0, 1, 2) and scored on the test split; publishing the
public start x0 is a candidate too. Rows are ranked at the per-run target (``certified_epsilon``:
every run meets it, as in the papers); ``epsilon_with_tuning`` charges the search and the
reported runs together. Every run goes through the experiment engine's one cache, so an
interrupted comparison resumes run by run.
"""

from . import audit, cnn, directed, entries, leaderboard, online, publish, tasks, tuning  # noqa: F401,E501  (each registers its own)
from .entries import DELTA, ENTRIES, LEFT_OUT, TRIALS, entry, run_code
from .leaderboard import COLUMNS, EPSILONS, calibration, compare, references, trial
from .publish import epsilons_of, markdown, ranking, write
from .tasks import RELATION, TASKS, build, task_spec

__all__ = ["COLUMNS", "DELTA", "ENTRIES", "EPSILONS", "LEFT_OUT", "RELATION", "TASKS", "TRIALS", "audit",
           "build", "calibration", "compare", "entry", "epsilons_of", "leaderboard", "markdown",
           "publish", "ranking", "references", "run_code", "task_spec", "trial", "tuning", "write"]
