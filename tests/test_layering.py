"""Each layer imports only the layers below it (DESIGN.md): checked on the source, imports inside
functions included, so a cycle cannot come back unnoticed."""

import ast
from pathlib import Path

import pytest

import dpnet

SRC = Path(dpnet.__file__).parent
# package -> the dpnet modules it may import (itself always allowed)
ALLOWED = {
    "graphs": {"errors"},
    "rng": {"errors"},
    "noise": {"errors", "rng"},
    "privacy": {"errors", "noise", "rng", "graphs"},
}


def _dpnet_imports(path: Path) -> set[str]:
    """First component (below dpnet) of every dpnet module the file imports."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parts[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = list(package[: len(package) - (node.level - 1)]) if node.level > 1 else list(
                package)
            parts = base + (node.module.split(".") if node.module else [])
            if parts:
                out.add(parts[0])
            else:   # from . import x at the top of the package
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpnet."):
            out.add(node.module.split(".")[1])
    return out


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_is_below_it(layer):
    paths = sorted((SRC / layer).rglob("*.py")) if (SRC / layer).is_dir() else [SRC / f"{layer}.py"]
    for path in paths:
        used = _dpnet_imports(path) - {layer}
        assert used <= ALLOWED[layer], (f"{path.relative_to(SRC)} imports "
                                         f"{sorted(used - ALLOWED[layer])}, above its layer")
