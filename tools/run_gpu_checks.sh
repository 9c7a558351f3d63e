#!/bin/bash
# Copyright 2026 The mtf_synthesizer Authors.
# Licensed under the Apache License, Version 2.0.
#
# The GPU checks of docs/pytorch_benchmark.md in one run that fits a time
# budget: the device check, every model compiled (training and static-cache
# generate(), --compile --compile_scope blocks: each repeated block compiled
# in place), the gpu preset eager, the fused path's open choices, the
# attention plan's routes against their alternatives, the gpu-long preset,
# one profiled step of the mixtures. Each step's output goes to
# OUT_DIR; a step gets at most its own limit and what is left of the
# budget, in this order (most needed first). STEPS, comma-separated, runs
# those steps only (check, compiled, gpu, choices, routes, long, profile,
# profile_mixtures), each with the whole budget as its limit.
#
#   tools/run_gpu_checks.sh OUT_DIR [BUDGET_SECONDS] [PYTHON] [STEPS]
#   tools/run_gpu_checks.sh runs/gpu 570 python3
#   tools/run_gpu_checks.sh runs/gpu 540 python3 profile_mixtures,compiled
#
# A rehearsal on a CPU, the same steps at small dims (PRESET and DEVICE
# replace the benchmark's --preset gpu and its device; the CUDA-only
# choices and routes steps are skipped):
#
#   DEVICE=cpu PRESET=cpu-host tools/run_gpu_checks.sh runs/rehearsal 900 \
#       .venv/bin/python
#
set -u
usage="usage: tools/run_gpu_checks.sh OUT_DIR [BUDGET] [PYTHON] [STEPS]"
out=${1:?$usage}
budget=${2:-570}
python=${3:-python3}
only=${4:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
deadline=$(( $(date +%s) + budget ))

step() {  # step NAME LIMIT COMMAND...
  local name=$1 limit=$2 left
  shift 2
  if [[ -n "$only" ]]; then
    [[ ",$only," == *",$name,"* ]] || return 0
    limit=$budget
  fi
  left=$(( deadline - $(date +%s) - 5 ))
  if (( left < 20 )); then
    echo "== $name: skipped, ${left}s left"
    return
  fi
  (( limit > left )) && limit=$left
  echo "== $name (limit ${limit}s) $(date -u +%T)"
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "== $name: exit $? $(date -u +%T)"
  tail -n 30 "$out/$name.log"
}

{
  date -u
  git rev-parse --short HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$python" -c "import sys, torch, transformers
print(sys.version.split()[0], torch.__version__, transformers.__version__)"
} > "$out/versions.txt" 2>&1
cat "$out/versions.txt"

preset=${PRESET:-gpu}
bench="$python tools/benchmark_torch.py ${DEVICE:+--device $DEVICE}"
long=gpu-long
[[ "$preset" != gpu ]] && long=$preset
step check 70 "$python" tools/check_torch_device.py --output_dir "$out/check"
step compiled 240 $bench --preset "$preset" --compile --compile_scope blocks \
    --cache_implementation static --warmup 1 --steps 2 --rounds 1 \
    --generate_repeats 1 --output_dir "$out/compiled"
step gpu 150 $bench --preset "$preset" --output_dir "$out/gpu"
if [[ "${DEVICE:-cuda}" == cuda ]]; then
  step choices 60 "$python" tools/compare_cuda_choices.py --rounds 6 \
      --repeats 3 --output_dir "$out/choices"
  step routes 90 "$python" tools/compare_cuda_choices.py --choices \
      routes,b2_rule,shared_softmax,values_apart --rounds 6 --repeats 3 \
      --output_dir "$out/routes"
fi
step long 80 $bench --preset "$long" --variants R,D,D+V \
    --generate_repeats 1 --output_dir "$out/long"
step profile 40 $bench --preset "$preset" --variants D+V,FD --warmup 1 \
    --steps 1 --rounds 1 --generate_repeats 0 --profile_dir "$out/profile" \
    --output_dir "$out/profile_run"
step profile_mixtures 40 $bench --preset "$preset" --variants R+V,FR+V \
    --warmup 1 --steps 1 --rounds 1 --generate_repeats 0 \
    --profile_dir "$out/profile_mixtures" \
    --output_dir "$out/profile_mixtures_run"
echo "== done $(date -u +%T)"
