"""Pinned claim verdicts of the quick reproductions, one golden file per experiment
(``golden/NAME.json``, keyed by claim id: the ids of the paper's prose file): a quick run that
starts to reproduce a claim it did not (or stops reproducing one) fails a test.

``DPNET_RECORD_VERDICTS=1 pytest tests/reproduce -p no:xdist`` rewrites the golden files from
the current verdicts instead of checking them (re-pin after a deliberate change, with the reason
in the commit). The huo, cw and cwz ones are on the tests' stand-in data fixtures."""

import json
import os
from pathlib import Path

from dpnet.lab.reproduce import Verdict

GOLDEN = Path(__file__).parent / "golden"


def check_verdicts(name: str, claims) -> None:
    """The quick verdicts of ``name``'s claims against ``golden/NAME.json``
    (``{"verdicts": {claim_id: verdict}}``): a claim id on one side only fails, naming it."""
    got = {c.id: c.verdict.value for c in claims}
    assert all(isinstance(c.verdict, Verdict) for c in claims)
    assert all(c.id for c in claims) and len(got) == len(claims), f"{name}: claim ids " \
        f"missing or repeated: {[c.id for c in claims]}"
    assert all(c.measured for c in claims), f"{name}: a claim without its measured numbers"
    for c in claims:        # a claim not reproduced says why, or what would settle it
        if c.verdict is Verdict.NOT_REPRODUCED:
            assert c.diagnosis and c.diagnosis["cause"], f"{name}: {c.id!r} has no diagnosis"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("DPNET_RECORD_VERDICTS"):
        path.write_text(json.dumps({"verdicts": got}, indent=1) + "\n")
        return
    assert path.is_file(), f"no pinned quick verdicts for {name!r} ({path})"
    pinned = json.loads(path.read_text())["verdicts"]
    only = sorted(set(got) ^ set(pinned))
    assert not only, f"{name}: claim id(s) {only} on one side only (run: {sorted(got)}, " \
        f"pinned: {sorted(pinned)})"
    changed = {k: (pinned[k], v) for k, v in got.items() if pinned[k] != v}
    assert not changed, f"{name}: quick verdicts changed (pinned, now): {changed}"
