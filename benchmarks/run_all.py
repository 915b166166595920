"""Run every ``benchmarks/bench_*.py`` (``make bench``) and print their tables.

Each benchmark is a script run in its own process with this interpreter; arguments given here
(e.g. ``--quick``) are passed on to every one. The exit status is non-zero when any benchmark
fails or misses its target.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    scripts = sorted(HERE.glob("bench_*.py"))
    if not scripts:
        print("no benchmarks/bench_*.py found")
        return 1
    start = time.perf_counter()
    failed = []
    for script in scripts:
        print(f"=== {script.name} {' '.join(args)}".rstrip(), flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, str(script), *args], cwd=HERE.parent).returncode
        print(f"=== {script.name}: {'ok' if rc == 0 else f'exit {rc}'} "
              f"({time.perf_counter() - t0:.0f} s)\n", flush=True)
        if rc != 0:
            failed.append(script.name)
    print(f"{len(scripts)} benchmark(s) in {time.perf_counter() - start:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
