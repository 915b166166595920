"""The API reference (issue 39 item 1): every public name has a docstring, every public module has
a page, and the site builds from them with warnings as errors (``mkdocs build --strict``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dpnet

ROOT = Path(__file__).resolve().parents[1]


def public_modules() -> list[str]:
    """Every module of the package with no ``_private`` component in its dotted name."""
    found = [m.name for m in pkgutil.walk_packages(dpnet.__path__, "dpnet.")
             if not any(part.startswith("_") for part in m.name.split(".")[1:])]
    return ["dpnet", *sorted(found)]


def _has_doc(obj) -> bool:
    return bool((inspect.getdoc(obj) or "").strip())


def undocumented() -> list[str]:
    """Public modules, and their own public classes, functions and methods, without a docstring
    (a method counts as documented if a base class documents it: the docstring is inherited)."""
    missing = []
    for name in public_modules():
        mod = importlib.import_module(name)
        if not (mod.__doc__ or "").strip():
            missing.append(f"{name} (module)")
        for attr, obj in vars(mod).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
            if not inspect.isclass(obj):
                continue
            for meth, member in vars(obj).items():
                if meth.startswith("_"):
                    continue
                fn = member.fget if isinstance(member, property) else getattr(member, "__func__",
                                                                               member)
                if inspect.isfunction(fn) and not _has_doc(getattr(obj, meth, fn)) \
                        and not (fn.__doc__ or "").strip():
                    missing.append(f"{name}.{attr}.{meth}")
    return missing


def test_every_public_name_has_a_docstring():
    missing = undocumented()
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


def test_every_public_module_has_an_api_page():
    listed = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        listed |= set(re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.MULTILINE))
    assert listed >= set(public_modules()), sorted(set(public_modules()) - listed)
    assert listed <= set(public_modules()), sorted(listed - set(public_modules()))


def _build(site: Path, config: Path) -> subprocess.CompletedProcess:
    # not -q: strict counts the warnings it logs, and -q would hide them from the count
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(config), "-d", str(site)], capture_output=True, text=True,
                          cwd=config.parent)


def test_the_site_builds_with_warnings_as_errors_and_a_broken_link_fails_it(tmp_path):
    pytest.importorskip("mkdocstrings")      # a dev dependency: make setup installs it
    done = _build(tmp_path / "site", ROOT / "mkdocs.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    page = tmp_path / "site" / "api" / "core" / "index.html"
    assert "SecretStreams" in page.read_text()              # rendered from the docstrings
    # the same site with one broken link must fail: strict is on
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "index.md").write_text((docs / "index.md").read_text() + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text().replace("paths: [src]",
                                                                 f"paths: [{ROOT / 'src'}]"))
    broken = _build(tmp_path / "broken", config)
    assert broken.returncode != 0 and "no-such-page.md" in broken.stdout + broken.stderr
