"""``dpnet compare``: which private algorithm gives the best model at my epsilon?

For each task (:mod:`.tasks`) and each target epsilon, every benchmarked algorithm
(:mod:`.entries`) is calibrated to the target by its default (sound) accountant and run; a second
row re-calibrates the tuned configuration with the tightest accountant dpnet has for it (PLD for
Laplace and Gaussian releases) where that differs. Pure-epsilon and (epsilon, delta) guarantees
share the epsilon axis at delta = 1e-5 (pure epsilon is (epsilon, 0)).

Tuning protocol, the same for every method: its search (:meth:`~.entries.Entry.search`: each
trial of its grid, a step size with a noise decay or a batch size, at each of the task's horizons,
:data:`~.entries.TRIALS` configurations on a task with two), each calibrated to the target at its
own horizon and run once (seed 100) on the training data, scored on the held-out validation split
by the ranked utility; the best one is then run with ``seeds`` (0, 1, 2) and scored on the test
split; publishing the public start x0 is a candidate too. The privacy cost of tuning is **not**
charged (as in the papers): a tuned row's epsilon covers one run. Every run goes through the
experiment engine's one cache, so an interrupted comparison resumes run by run.
"""

from . import audit, cnn, directed, entries, leaderboard, online, publish, tasks  # noqa: F401  (each registers its own)
from .entries import DELTA, ENTRIES, LEFT_OUT, TRIALS, entry, run_code
from .leaderboard import COLUMNS, EPSILONS, calibration, compare, references, trial
from .publish import epsilons_of, markdown, ranking, write
from .tasks import RELATION, TASKS, build, task_spec

__all__ = ["COLUMNS", "DELTA", "ENTRIES", "EPSILONS", "LEFT_OUT", "RELATION", "TASKS", "TRIALS", "audit",
           "build", "calibration", "compare", "entry", "epsilons_of", "leaderboard", "markdown",
           "publish", "ranking", "references", "run_code", "task_spec", "trial", "write"]
