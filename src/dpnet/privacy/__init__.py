"""Privacy guarantees, per-paper accountants, composition and calibration."""

from . import xie
from .composition import calibrate, inverse_geometric_sum, laplace_composition
from .guarantee import PrivacyGuarantee

__all__ = ["PrivacyGuarantee", "calibrate", "laplace_composition", "inverse_geometric_sum", "xie"]
