"""dpnet: differentially private decentralized optimization.

n agents on a graph jointly minimise a sum of private objectives while exchanging only noisy,
often compressed messages; dpnet runs the algorithms of the literature behind one API, says how
much privacy each run spent, and regenerates the papers' figures.
"""

from . import algorithms, compression, graphs, models, noise, partitions, privacy, problems
from .errors import DPNetError, NonFiniteError, ParameterError, UnknownNameError
from .network import Network
from .runner import Result, run
from .version import __version__

__all__ = ["__version__", "algorithms", "compression", "graphs", "models", "noise", "partitions",
           "privacy", "problems", "Network", "Result", "run", "DPNetError", "NonFiniteError",
           "ParameterError", "UnknownNameError"]
