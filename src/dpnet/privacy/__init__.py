"""Privacy guarantees, per-paper accountants, composition and calibration."""

from . import xie
from .assumptions import ASSUMPTIONS, Assumptions
from .calibration import calibrate
from .composition import inverse_geometric_sum, laplace_composition
from .guarantee import PrivacyGuarantee

__all__ = ["ASSUMPTIONS", "Assumptions", "PrivacyGuarantee", "calibrate", "laplace_composition",
           "inverse_geometric_sum", "xie"]
