#!/usr/bin/env bash
# The wheels gpu_queue.sh installs on the device machine (no network there): dpnet's dependencies
# that its image lacks, for CPython 3.12 on x86-64. Run here, in the repository root, before a
# slot; .whl/ is kept out of git (.git/info/exclude) and is carried with the call. cryptography
# (dpnet.secret_rng, dpnet.pair_keys) came with issue 38; the image may have it already.
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl/' >> .git/info/exclude; }
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_34_x86_64 \
    -d .whl dp-accounting==0.6.0 dm-tree==0.1.10 cryptography==50.0.2 cffi pycparser \
    'setuptools>=77'
ls -l .whl
