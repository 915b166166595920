"""The one writer of the application layer's files: Markdown tables, CSV and PNG.

Figures are :class:`matplotlib.figure.Figure` objects built without pyplot, so writing a PNG
never switches the process's backend (a notebook that imports :mod:`dpnet.lab` keeps its inline
plots) and never leaves a figure open in pyplot's registry. matplotlib itself is imported on
first use: ``dpnet --help`` does not pay for it.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ParameterError


def require_folder(name: str, path: str | Path) -> Path:
    """``path`` as a folder that can be written (created if absent), checked before any work
    starts: a file in the way or an unwritable parent is an error naming the option."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ParameterError(name, str(path), "a folder (a file of that name exists)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParameterError(name, str(path), f"a folder that can be created ({err.strerror})"
                             ) from None
    probe = path / ".dpnet-write-probe"
    try:
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise ParameterError(name, str(path), f"a writable folder ({err.strerror})") from None
    return path


def figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (6.0, 4.0), **kw: Any):
    """``(fig, axes)`` as :func:`matplotlib.pyplot.subplots` returns them, without pyplot."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kw)


def colormap(name: str):
    """A named matplotlib colormap (``"tab20"``), without pyplot."""
    import matplotlib

    return matplotlib.colormaps[name]


def save_png(fig, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` as a PNG (tight bounding box) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def cell(value: Any) -> Any:
    """A table cell: floats to 6 significant digits, non-finite ones spelled out."""
    if isinstance(value, float):
        return str(value) if not math.isfinite(value) else f"{value:.6g}"
    return value


def md_escape(text: Any) -> str:
    """``text`` as one Markdown table cell: its string with ``|`` escaped and newlines replaced by spaces."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Every key of ``rows`` in order of first appearance."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    return keys


def md_table(rows: Sequence[dict[str, Any]], keys: Sequence[str] | None = None) -> list[str]:
    """A Markdown table (one line per element) of ``rows`` over ``keys`` (default: all)."""
    if not rows:
        return []
    keys = list(keys) if keys is not None else columns(rows)
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        out.append("| " + " | ".join(md_escape(cell(r.get(k, ""))) for k in keys) + " |")
    return out


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path,
              keys: Sequence[str] | None = None, rounded: bool = False) -> Path:
    """One CSV line per row over ``keys`` (default: all); absent or None cells are empty.
    Numbers at full precision unless ``rounded`` (6 significant digits, as the tables)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(keys) if keys is not None else columns(rows)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else cell(r.get(k)) if rounded else r.get(k)
                        for k in keys})
    return path
