"""Checkpoint files that load without executing code.

A dpnet checkpoint is a ``torch.save`` file of a dict of *plain data*: ``None``, ``bool``,
``int``, ``float``, ``complex``, ``str``, tensors, and dicts, lists and tuples of them, plus the
format marker ``"format": "dpnet-checkpoint/1"``. :func:`load` reads it with
``torch.load(weights_only=True)``, whose restricted unpickler builds only tensors and these
containers and refuses to import any other class or function, so a file crafted to run code (a
``__reduce__`` payload) is refused before anything in it is called. A file that unpickles but
lacks the marker (some other program's checkpoint, or one written before the marker existed) is
refused too.

Why plain data rather than allow-listing dpnet's classes: an allow-listed class is rebuilt by
calling it with whatever state the file holds, while plain data only ever becomes tensors and
builtins. So objects are converted explicitly on the way in and out: the network's
:class:`~dpnet.network.BitLedger` and :class:`~dpnet.network.Transcript` by their ``to_state`` /
``from_state`` pairs (used by :meth:`dpnet.network.Network.state_dict`), NumPy scalars
become Python numbers and NumPy arrays become tensors (:func:`load` returns them as tensors).
"""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import torch

from .errors import ParameterError, require

__all__ = ["FORMAT", "SAFE_GLOBALS", "load", "save"]

FORMAT = "dpnet-checkpoint/1"

# Classes and functions a dpnet checkpoint may name beyond PyTorch's own tensor allow-list.
# Deliberately empty: everything dpnet writes is converted to plain data first (module docstring).
SAFE_GLOBALS: list[Any] = []

_PLAIN_SCALARS = (type(None), bool, int, float, complex, str)
_PLAIN_TEXT = ("plain data: None, bool, int, float, complex, str, tensors, NumPy arrays and "
               "dicts, lists and tuples of them")


# -- files ----------------------------------------------------------------------------------
def save(snapshot: dict, path: str | Path) -> Path:
    """Write ``snapshot`` (a dict of plain data, see the module docstring) to ``path``.

    Atomic: the file is written and synced under a temporary name in the same folder, then
    renamed over ``path``, so a crash mid-write leaves the previous checkpoint intact instead of
    a torn one."""
    require(isinstance(snapshot, dict), "snapshot", type(snapshot).__name__, "a dict")
    require("format" not in snapshot, "snapshot['format']", snapshot.get("format"),
            "absent: save() writes the format marker itself")
    data = {**_plain(snapshot, "snapshot"), "format": FORMAT}
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load(path: str | Path) -> dict:
    """The snapshot saved by :func:`save` at ``path`` (without the format marker).

    Never executes code from the file: a file naming any class or function outside PyTorch's
    tensor allow-list and :data:`SAFE_GLOBALS`, or lacking the format marker, raises
    :class:`~dpnet.errors.ParameterError` naming the path."""
    path = Path(path)
    # the value is shortened in messages; the condition carries the whole path
    require(path.is_file(), "path", path.name, f"an existing checkpoint file (looked for {path})")
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            data = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        _refuse(path, f"{_offending(err)}; refused before anything in it was run")
    except Exception as err:  # noqa: BLE001 - whatever arbitrary bytes make torch.load raise
        _refuse(path, f"torch.load cannot read it ({type(err).__name__}: {_first_line(err)})")
    if not isinstance(data, dict):
        _refuse(path, f"it holds a {type(data).__name__}, not a dict with 'format': {FORMAT!r}")
    if data.get("format") != FORMAT:
        _refuse(path, f"its 'format' is {data.get('format')!r}, not {FORMAT!r} (written by "
                      "another program or an older dpnet: delete it to recompute)")
    return {k: v for k, v in data.items() if k != "format"}


def _refuse(path: Path, why: str) -> NoReturn:
    """The error for a file that is not a dpnet checkpoint. The path is spelled out in the
    condition too: the error's value field shortens long reprs."""
    raise ParameterError("path", str(path), f"a dpnet checkpoint; {path} is not one: {why}")


def _offending(err: Exception) -> str:
    """What a refused file asks for, from PyTorch's message: a global (``GLOBAL module.name``,
    a class or function that unpickling would import and call) or a pickle instruction the
    restricted unpickler does not run."""
    text = str(err)
    if m := re.search(r"GLOBAL ([\w.]+)", text):
        return (f"it names {m.group(1)}, which unpickling would import and call, so loading it "
                "would execute code")
    if m := re.search(r"Unsupported operand (\d+)", text):
        return f"it holds pickle instruction {m.group(1)}, which no dpnet checkpoint contains"
    return f"the restricted unpickler refused it ({_first_line(err)})"


def _first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:200]


def _plain(value: Any, where: str) -> Any:
    """``value`` as plain data (NumPy scalars to numbers, arrays to tensors); anything else is
    refused here, at save time, rather than written into a file that :func:`load` will refuse."""
    if isinstance(value, np.generic):  # before the builtins: np.float64 subclasses float
        return value.item()
    if isinstance(value, (*_PLAIN_SCALARS, torch.Tensor)):
        return value
    if isinstance(value, np.ndarray):
        require(value.dtype.kind in "biufc", where, f"array of dtype {value.dtype}",
                "a numeric or boolean array")
        return torch.from_numpy(np.array(value, copy=True))
    if isinstance(value, dict):
        for key in value:
            require(isinstance(key, _PLAIN_SCALARS), f"{where} key", repr(key),
                    "None, bool, int, float, complex or str")
        return {k: _plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise ParameterError(where, type(value).__name__, _PLAIN_TEXT,
                         "convert objects to plain data first, e.g. with ledger_to_state")


# -- network objects as plain data ----------------------------------------------------------
