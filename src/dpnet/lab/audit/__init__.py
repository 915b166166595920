"""Empirical privacy audits and the eavesdropper lab, above the runner.

* :mod:`dpnet.lab.audit.engine`: run an algorithm on adjacent inputs many times, record what an
  eavesdropper sees, and bound epsilon from below with confidence (``dpnet audit NAME``);
* :mod:`dpnet.lab.audit.targets`: the registered audit targets (one per claim worth checking);
* :mod:`dpnet.lab.audit.attacks`: reconstructions of gradients and states from transcripts;
* :mod:`dpnet.lab.audit.suite`: what ``dpnet audit`` does (targets' reports, the summary table).

This package depends on the algorithms, the network and the runner; :mod:`dpnet.privacy` (the
accountants) depends on none of them.
"""

from . import attacks, engine, suite, targets
from .engine import AuditTarget, register_target

__all__ = ["AuditTarget", "attacks", "engine", "register_target", "suite", "targets"]
