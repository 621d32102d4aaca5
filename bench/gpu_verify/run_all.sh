#!/usr/bin/env bash
# The GPU evidence run (bench/results/gpu_verify.md): run on the GPU machine from the repository root as
#   bash bench/gpu_verify/run_all.sh OUTDIR [SECONDS]
# Items run in order of importance and are skipped once SECONDS (default 540) are spent; everything is packed
# into OUTDIR/results.tgz after each item, so a run cut short still returns what it measured.
set -u
OUTDIR=$(realpath "${1:?OUTDIR}")
BUDGET=${2:-540}
REPO=$(pwd)
START=$(date +%s)
WORK=/tmp/gpu_verify
RES=$WORK/res
rm -rf "$WORK" && mkdir -p "$RES" "$WORK/scratch"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

left() { echo $(( BUDGET - ($(date +%s) - START) )); }
log() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$RES/log.txt"; }
pack() { tar -czf "$OUTDIR/results.tgz.part" -C "$WORK" res && mv "$OUTDIR/results.tgz.part" "$OUTDIR/results.tgz"; }
gpulint() { "$PY" -m gpulint "$@"; }
# run NAME SECONDS CMD...: bounded by both SECONDS and what is left of the budget
bounded() {
  local name=$1 want=$2; shift 2
  local have=$(( $(left) - 5 ))
  if (( have < 20 )); then log "SKIP $name (budget spent)"; echo "$name" >> "$RES/skipped.txt"; return 99; fi
  local t=$(( want < have ? want : have ))
  log "START $name (limit ${t}s)"
  timeout -k 5 "$t" "$@"; local rc=$?
  log "END $name rc=$rc"
  return $rc
}

# 0. The machine
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvidia-smi | head -15
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version()); print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(torch|torchvision|timm|transformers|lightning|accelerate|nvidia-ml-py|libcst|numpy) "
  nproc; git -C "$REPO" rev-parse HEAD 2>/dev/null
  command -v nsys ncu || echo "no nsys/ncu on PATH"
} > "$RES/env.txt" 2>&1
log "env done"; pack

# GV_ONLY="NAME NAME..." runs only those items (a rerun of a few); the ground truth and the race are "gt" and "race"
only() { [[ -z "${GV_ONLY:-}" || " $GV_ONLY " == *" $1 "* ]]; }

# 1. Ground truth for the profiler's figures (kernel busy, copy kinds, syncs) and its overhead
if only gt; then
mkdir -p "$WORK/scratch/gt" && cp bench/gpu_verify/gt_loop.py "$WORK/scratch/gt/" && cd "$WORK/scratch/gt"
bounded gt_self 60 "$PY" gt_loop.py --self-measure "$RES/gt_self.json"
for r in 1 2; do
  bounded "gt_hand_$r" 40 "$PY" gt_loop.py --steps 200 --hand-timed "$RES/gt_hand_$r.json"
  bounded "gt_profile_$r" 90 "$PY" -m gpulint profile --repeat 1 --json "$RES/gt_profile_$r.json" --trace "$RES/gt_trace_$r" -- "$PY" gt_loop.py > "$RES/gt_profile_$r.txt" 2>&1
done
"$PY" "$REPO/bench/gpu_verify/gt_analyze.py" "$RES"/gt_self.json.trace.json $(ls "$RES"/gt_trace_*/* 2>/dev/null) > "$RES/gt_analysis.jsonl" 2>&1
cd "$REPO"; pack
fi

# 2. Stream correctness: a racy side stream, before and after GPU301's fix
if only race; then
mkdir -p "$WORK/scratch/race" && cp bench/gpu_verify/stream_race.py "$WORK/scratch/race/" && cd "$WORK/scratch/race"
bounded race_before 40 "$PY" stream_race.py 20 > "$RES/race_before.txt" 2>&1
gpulint fix --apply --unsafe-fixes stream_race.py > "$RES/race_fix.txt" 2>&1
bounded race_after 40 "$PY" stream_race.py 20 > "$RES/race_after.txt" 2>&1
cd "$REPO"; pack
fi

# 2b. What each pattern costs (bench/results/cost_facts.md); COSTS_ARGS="--only=steps --variants=..." reruns a part
if only costs; then
bounded costs 240 "$PY" bench/gpu_verify/cost_facts.py "$RES/cost_facts.json" ${COSTS_ARGS:-} > "$RES/cost_facts.txt" 2>&1
pack
fi
# 2c. Nsight Compute's kernel times for the ground-truth loop beside gpulint profile's kernel busy on the same GPU
if only ncu; then
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p "$WORK/scratch/ncu" && cp bench/gpu_verify/gt_loop.py "$WORK/scratch/ncu/" && cd "$WORK/scratch/ncu"
bounded ncu 60 "$NCU" --target-processes all ${NCU_ARGS:-} --launch-skip 400 --launch-count 100 --metrics gpu__time_duration.sum \
  --csv "$PY" gt_loop.py --steps 40 > "$RES/ncu.csv" 2> "$RES/ncu.err"
bounded ncu_gt_profile 90 "$PY" -m gpulint profile --repeat 1 --json "$RES/ncu_gt_profile.json" -- "$PY" gt_loop.py > "$RES/ncu_gt_profile.txt" 2>&1
cd "$REPO"; pack
fi

# 3. Real training scripts, then 4. the fixtures: check, then fix --apply --unsafe-fixes --verify
verify() {  # verify NAME SRC SECONDS [gpulint options...]
  local name=$1 src=$2 want=$3; shift 3
  only "$name" || return 0
  local dir="$WORK/scratch/$name"; mkdir -p "$dir" && cp "$src" "$dir/" && cd "$dir"
  local script; script=$(basename "$src")
  gpulint check --unsafe-fixes "$@" --output-format json "$script" > "$RES/$name.check.json" 2>"$RES/$name.check.err"
  bounded "$name" "$want" "$PY" -m gpulint fix --apply --unsafe-fixes "$@" --verify ${VERIFY_OPTS:---repeat 2 --steps 20 --warmup 5} --timeout 100 --first-step-timeout 60 --json "$RES/$name.verify.json" -- "$PY" "$script" > "$RES/$name.verify.txt" 2>&1
  if grep -q "Nothing to fix" "$RES/$name.verify.txt"; then
    bounded "$name.profile" 90 "$PY" -m gpulint profile --repeat 1 --json "$RES/$name.profile.json" -- "$PY" "$script" > "$RES/$name.profile.txt" 2>&1
  fi
  cd "$REPO"; pack
}
S=bench/gpu_verify/scripts
F=fixtures
# Most important first (the budget cuts the tail): data-path fixes on real scripts and fixtures, then the rest
verify resnet50_decode $S/resnet50_decode.py 200
verify fixture_slow_loader $F/profile/slow_loader.py 200
verify dcgan $S/dcgan.py 200
verify fixture_pageable_copies $F/profile/pageable_copies.py 200
verify lightning_classifier $S/lightning_classifier.py 200
verify nanogpt_style $S/nanogpt_style.py 200 --preview
verify fixture_sync_heavy $F/sync_heavy.py 200
verify timm_vit_amp $S/timm_vit_amp.py 200
verify hf_trainer_text $S/hf_trainer_text.py 200
verify convnet_fixed_shapes $S/convnet_fixed_shapes.py 120 --select GPU903
for f in $F/profile/cuda_branch.py $F/train_classifier.py $F/convnet_amp.py $F/loader_pipeline.py \
         $F/loader_streaming.py $F/train_regression.py $F/profile/item_every_step.py $F/profile/two_optimizers.py; do
  verify "fixture_$(basename "$f" .py)" "$f" 150
done
log "all done"; pack
