"""The prose of a paper's reproductions, read once from its data file (``data/<module>.toml``).

What a reader reads lives in one TOML file per paper: the paper's claims, each diagnosis's cause
and change, what would settle an open claim, the choices made where the paper is silent, notes,
titles and citations. What computes stays in Python (predicates, counterfactual runs, figures,
tables) and is joined to the prose by id, so rewording a claim touches no code and no cached run
(the run keys hash code, not data files). The file's tables:

``paper``
    the citation every spec of the file extends (``"Authors: Title (paper 004), §VI"``);
``[texts]``
    named snippets, usable as ``{name}`` in every text (one sentence shared by several claims),
    and the wording of computed notes, captions and settings (:meth:`Prose.texts`);
``[choices]``
    named lists of choices made where the paper is silent; a spec lists the groups it makes;
``[specs.NAME]``
    ``title``, ``cite`` (appended to ``paper`` after a comma), ``choices`` (group names, in
    order) and ``notes`` (texts) of experiment NAME;
``[claims.ID]``
    ``text``, the paper's claim, and ``settle``: what would settle it where no diagnosis is known;
``[diagnoses.NAME]``
    ``cause`` and ``change``: the Python's ``Diagnosis(NAME, counterfactual)`` supplies the run.

Every text is a :meth:`str.format` template, filled from the spec's ``fields``, the check's
``fields`` and the ``[texts]`` snippets (so a literal brace is written ``{{`` or ``}}``): one claim
text serves every case it is checked on. An id on one side only is refused with a
:class:`~dpnet.errors.ParameterError` naming the id, the file and the known ids: a Check, a
diagnosis, a snippet or a spec without its entry when the spec is built, and an entry that no spec
of the file uses when the file's specs are registered (:meth:`Prose.verify`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import ParameterError

#: where the paper modules' prose files live (package data)
DATA = Path(__file__).parent / "data"
_TABLES = ("texts", "choices", "specs", "claims", "diagnoses")
_ONE = {"texts": "text", "choices": "choice group", "specs": "spec", "claims": "claim",
        "diagnoses": "diagnosis"}
_KEYS = {"specs": {"title", "cite", "choices", "notes"}, "claims": {"text", "settle"},
         "diagnoses": {"cause", "change"}}


class Prose:
    """The prose of one paper (one data file): look-ups by id that name the file on a miss."""

    def __init__(self, data: Mapping[str, Any], source: str = "<prose>") -> None:
        self.source = source
        unknown = sorted(set(data) - {"paper", *_TABLES})
        if unknown:
            raise ParameterError("prose table", unknown[0], f"one of paper, {', '.join(_TABLES)} "
                                 f"in {source}")
        self.paper: str = data.get("paper", "")
        self.tables: dict[str, dict[str, Any]] = {t: dict(data.get(t, {})) for t in _TABLES}
        self.used: set[str] = set()     # the snippets some text has used (see verify)
        for table, keys in _KEYS.items():
            for name, entry in self.tables[table].items():
                extra = sorted(set(entry) - keys)
                if extra:
                    raise ParameterError(f"{table}.{name} key", extra[0],
                                         f"one of {', '.join(sorted(keys))} in {source}")

    @classmethod
    def load(cls, path: str | Path) -> Prose:
        """Read a prose file (a paper's ``DATA / "<module>.toml"``, or any path)."""
        path = Path(path)
        if not path.is_file():
            raise ParameterError("prose file", str(path), "an existing TOML file")
        with path.open("rb") as f:
            return cls(tomllib.load(f), path.name)

    def entry(self, table: str, name: str) -> Any:
        """Entry ``name`` of ``table``; a missing one names the file and the known ids."""
        known = self.tables[table]
        if name not in known:
            raise ParameterError(f"{_ONE[table]} id", name, f"an entry [{table}.{name}] in "
                                 f"{self.source} ({self.paper or 'no paper'}); known: "
                                 f"{', '.join(sorted(known)) or 'none'}")
        return known[name]

    def format(self, text: str, fields: Mapping[str, Any], where: str) -> str:
        """``text`` with its ``{field}``s filled from ``fields`` and the ``[texts]`` snippets."""
        return text.format_map(_Fields(fields, self, where))

    def texts(self, *names: str) -> list[Callable[..., str]]:
        """Fillers of the ``[texts]`` snippets ``names``, checked and recorded as used now (so a
        snippet only Python fills at report time is known to :meth:`verify`): ``fill(**fields)``
        is the snippet with its ``{field}``s filled."""
        for name in names:
            self.entry("texts", name)
            self.used.add(name)
        return [partial(self.fill, name) for name in names]

    def group(self, prefix: str, *keys: str) -> Callable[..., dict[str, str]]:
        """A filler of the snippets ``PREFIX-KEY`` (see :meth:`texts`) that returns them as a
        dict by key, in order: a spec's settings."""
        fills = self.texts(*(f"{prefix}-{k}" for k in keys))
        return lambda **fields: {k: fill(**fields) for k, fill in zip(keys, fills)}

    def fill(self, name: str, /, **fields: Any) -> str:
        """Snippet ``name`` of ``[texts]`` with its ``{field}``s filled from ``fields``."""
        return self.format(f"{{{name}}}", fields, f"text {name}")

    def verify(self, specs: Iterable[Any]) -> None:
        """Every claim, diagnosis, choice group, snippet and spec of the file is used by one of
        ``specs`` (all the specs built on this file): an orphan is an error, never skipped."""
        specs = list(specs)
        used = {"specs": {s.name for s in specs},
                "claims": {c.id for s in specs for c in s.checks},
                "diagnoses": {c.diagnosis.name for s in specs for c in s.checks if c.diagnosis},
                "choices": {g for s in specs for g in self.entry("specs", s.name).get("choices", ())},
                "texts": self.used}
        for table, names in used.items():
            orphans = sorted(set(self.tables[table]) - names)
            if orphans:
                raise ParameterError(f"{_ONE[table]} id", orphans[0], f"an entry of "
                                     f"{self.source} ({self.paper or 'no paper'}) that a spec "
                                     f"uses; no spec of {', '.join(sorted(used['specs']))} "
                                     f"uses it (used: {', '.join(sorted(names)) or 'none'})")


class _Fields(dict):
    """The fields of one text: the given ones, then the file's snippets (formatted in turn, and
    recorded as used so that :meth:`Prose.verify` finds an unused one)."""

    def __init__(self, fields: Mapping[str, Any], prose: Prose, where: str) -> None:
        super().__init__(fields)
        self.prose, self.where = prose, where

    def __missing__(self, key: str) -> str:
        texts = self.prose.tables["texts"]
        if key not in texts:
            raise ParameterError("prose field", key, f"a field of the spec or check, or a "
                                 f"[texts] snippet of {self.prose.source} (in {self.where}); "
                                 f"fields: {', '.join(sorted(self)) or 'none'}")
        self.prose.used.add(key)
        return texts[key].format_map(self)
