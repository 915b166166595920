"""Empirical privacy audits and the eavesdropper lab, above the runner.

* :mod:`dpnet.audit.engine`: run an algorithm on adjacent inputs many times, record what an
  eavesdropper sees, and bound epsilon from below with confidence (``dpnet audit NAME``);
* :mod:`dpnet.audit.targets`: the registered audit targets (one per claim worth checking);
* :mod:`dpnet.audit.attacks`: reconstructions of gradients and states from transcripts.

This package depends on the algorithms, the network and the runner; :mod:`dpnet.privacy` (the
accountants) depends on none of them.
"""

from . import attacks, engine, targets
from .engine import AuditTarget, register_target

__all__ = ["AuditTarget", "attacks", "engine", "register_target", "targets"]
