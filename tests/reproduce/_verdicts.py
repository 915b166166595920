"""Pinned claim verdicts of the quick reproductions, one golden file per experiment
(``golden/NAME.json``): a quick run that starts to reproduce a claim it did not (or stops
reproducing one) fails a test.

``DPNET_RECORD_VERDICTS=1 pytest tests/reproduce -p no:xdist`` rewrites the golden files from
the current verdicts instead of checking them (re-pin after a deliberate change, with the reason
in the commit). The huo, cw and cwz ones are on the tests' stand-in data fixtures."""

import json
import os
from pathlib import Path

from dpnet.lab.reproduce import Verdict

GOLDEN = Path(__file__).parent / "golden"


def check_verdicts(name: str, claims) -> None:
    got = [c.verdict.value for c in claims]
    assert all(isinstance(c.verdict, Verdict) for c in claims)
    assert all(c.measured for c in claims), f"{name}: a claim without its measured numbers"
    from dpnet.lab import reproduce as experiments

    converted = experiments.get(name).spec is not None
    for c in claims:        # a spec's claim not reproduced says why, or what would settle it
        if converted and c.verdict is Verdict.NOT_REPRODUCED:
            assert c.diagnosis and c.diagnosis["cause"], f"{name}: {c.text!r} has no diagnosis"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("DPNET_RECORD_VERDICTS"):
        path.write_text(json.dumps({"claims": [c.text for c in claims], "verdicts": got},
                                   indent=1) + "\n")
        return
    assert path.is_file(), f"no pinned quick verdicts for {name!r} ({path})"
    pinned = json.loads(path.read_text())
    assert got == pinned["verdicts"], f"{name}: quick verdicts changed from " \
        f"{pinned['verdicts']} to {got}"
