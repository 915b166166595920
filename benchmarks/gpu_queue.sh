#!/usr/bin/env bash
# One item of the GPU queue (issue 27) on a lent device machine, its logs and tables into OUTDIR.
#
#   benchmarks/gpu_queue.sh ITEM OUTDIR        (QUICK=1: tiny sizes, a dry run on any CPU)
#
# Before a slot, here: benchmarks/gpu_wheels.sh (fills .whl/); then the device call carries .whl:
#   run(command="bash benchmarks/gpu_queue.sh 1 $OUT/q1", carry=[".whl"], timeout_s=570)
#
# The device image brings its own PyTorch, numba, scipy, ...; dpnet's missing dependencies travel
# as wheels in .whl/ (dp-accounting and dm-tree; see benchmarks/RESULTS.md, "GPU") and dpnet is
# installed beside them with --no-deps, so the image's PyTorch is the one measured. Each step
# writes its own log; a failing step is reported and the next one still runs; the exit status is
# the number of failed steps.
set -uo pipefail
item=${1:?usage: gpu_queue.sh ITEM OUTDIR}
out=${2:?usage: gpu_queue.sh ITEM OUTDIR}
quick=${QUICK:-0}
py=${PYTHON:-python3}
mkdir -p "$out"
failed=0

step() {   # step NAME LIMIT_S COMMAND...: run, log to OUTDIR/NAME.log, keep going on failure
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    echo "== $name: $*"
    PYTHONUNBUFFERED=1 timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc after $((SECONDS - t0)) s"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
    return 0
}

# dpnet's pyproject needs setuptools >= 77 (an SPDX license string): an older one in the image
# cannot build it without build isolation, so the wheel's copy goes first on the path
if [ -d .whl ] && ! "$py" -c "import dp_accounting, cryptography, setuptools, sys;
sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 90
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$py" -c "import dpnet" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
        --target /tmp/site . || exit 91
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
{
    "$py" -c "import torch, dpnet; print('dpnet', dpnet.__version__, 'torch', torch.__version__,
'cuda', torch.version.cuda, 'device', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1
    nproc
} | tee "$out/machine.txt"

case "$item" in
1)  # the CUDA tests, DiaDSP at n*d = 1e8 against one CPU core, the neural gradients on the GPU
    device_tests=(tests/test_device.py tests/test_runner_device.py tests/test_rng.py tests/test_noise.py)
    step device-tests 60 "$py" -m pytest -p no:cacheprovider -n 4 -rs "${device_tests[@]}"
    if [ "$quick" = 1 ]; then
        step bench_neural 300 "$py" benchmarks/bench_neural.py --quick --agents 10 --device cuda
        step bench_device 300 "$py" benchmarks/bench_device.py --quick --device cuda
    else
        step bench_neural 120 "$py" benchmarks/bench_neural.py --device cuda
        # 5 iterations: one CPU core needs about 10 s per iteration at n*d = 1e8
        step bench_device 170 "$py" benchmarks/bench_device.py --iterations 5 --profile 15 --device cuda
        # the whole suite with the CUDA tests enabled, as far as the slot allows
        step suite "${SUITE_S:-120}" "$py" -m pytest -p no:cacheprovider -n "$(nproc)" --dist loadfile -rfE
    fi
    ;;
*)  echo "queue item $item is not prepared yet: items 2-6 need the CIFAR-10/MNIST files and a" \
         "checkpoint carried between slots (issue 27)"; exit 2 ;;
esac

for f in "$out"/*.log; do
    echo "--- $(basename "$f"): last lines"
    tail -n 12 "$f"
done
exit "$failed"
