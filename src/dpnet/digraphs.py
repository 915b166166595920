"""Former home of paper 003's directed pairs: now :mod:`dpnet.graphs.directed` (re-exported)."""

from .graphs.directed import *  # noqa: F401, F403
from .graphs.directed import _roots  # noqa: F401
