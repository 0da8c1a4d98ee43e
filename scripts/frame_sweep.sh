#!/usr/bin/env bash
# Frame-budget sweep: one model over f in {8,16,32,64,128} on naru_mcq_500 (the paper's Fig. 3/4).
#
#   scripts/frame_sweep.sh --model naru_qwen2_5_vl --model_args pretrained=Qwen/Qwen2.5-VL-7B-Instruct \
#       --out results/sweeps/qwen2_5_vl
#   scripts/frame_sweep.sh --model naru_replay --model_args 'predictions=preds_{F}.jsonl' \
#       --budgets 8,16 --out out/replay
#   scripts/frame_sweep.sh ... --launcher "accelerate launch --multi_gpu --num_processes 4 -m lmms_eval"
#   naru-eval sweep submit --model ... --out ...      (SLURM: one array task per budget; docs/cluster.md)
#
# The shell entry point of the one experiment driver, `naru-eval experiment run`
# (naru_eval/cli/experiment.py, naru_eval/cli/runner.py): this script finds the Python naru-eval is
# installed in and hands it every argument. Flags (`--help` lists them all): --model, --model_args
# ("{F}" is replaced by the budget; num_frames=F is appended), --out, --budgets (default
# 8,16,32,64,128), --index I (SLURM arrays), --tasks, --open, --label, --launcher, --python PY,
# --store-per-budget, --quiet, --dry-run, and -- LMMS_EVAL_ARGS; the grid options of the driver
# (--ablation, --axis, --variant) too. Each budget F gets OUT/fF/ (lmms-eval's output directory)
# with manifest.json (model, args without secrets, budget and its sampling label "F Frames",
# package versions, git revision, data fingerprint, usage). Resumable: a budget whose run is
# complete (its files: naru-eval verify-run's check) is skipped; an unfinished one runs again and
# the response store (NARU_RESPONSE_STORE, default OUT/responses.sqlite) skips the questions
# already answered. Every lmms-eval start is logged to OUT/sweep.log ("f=F invoke"). A signal
# marks the running budget "cancelled"; any other end while it runs "failed".
# Environment: NARU_DATA_DIR or NARU_HF_DATASET (the data, required); NARU_RESPONSE_STORE ("{F}":
# the budget, "{rank}": each process's rank); NARU_FRAME_CACHE (default OUT/frames); PYTHON.
# Exit status: 0 when every selected budget is complete, 1 on the first failure, 2 on a usage
# error, 128+N when stopped by signal N.
set -euo pipefail

die() { echo "frame_sweep: error: $1" >&2; exit "${2:-1}"; }

PY="${PYTHON:-}"
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) PY="${2:?--python needs a value}"; shift 2 ;;
    --) ARGS+=("$@"); break ;;
    *) ARGS+=("$1"); shift ;;
  esac
done

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$SCRIPT_DIR")"
# the python that has naru-eval
if [[ -z "$PY" ]]; then
  if command -v lmms-eval >/dev/null 2>&1 && [[ -x "$(dirname "$(command -v lmms-eval)")/python" ]]; then
    PY="$(dirname "$(command -v lmms-eval)")/python"
  elif [[ -x "$REPO_DIR/.venv/bin/python" ]]; then
    PY="$REPO_DIR/.venv/bin/python"  # the checkout's environment (make env)
  else
    PY=python3
  fi
fi
MISSING="$("$PY" -c 'import importlib.util as u; print(" ".join(m for m in ("naru_eval", "lmms_eval", "pydantic") if u.find_spec(m) is None))' 2>&1)" \
  || die "cannot run $PY ($MISSING); pass --python /path/to/venv/bin/python" 2
[[ -z "$MISSING" ]] || die "$PY has no ${MISSING// /, } installed: it is not the environment naru-eval is installed in. \
Pass --python /path/to/venv/bin/python (or set PYTHON=...; VENV=/path/to/venv for scripts/frame_sweep.slurm); \
\`make env\` in the checkout builds $REPO_DIR/.venv, which the sweep then finds itself" 2

export NARU_EVAL_REPO="${NARU_EVAL_REPO:-$REPO_DIR}"  # the manifest's git revision is this checkout's
exec "$PY" -m naru_eval.cli experiment run ${ARGS[@]+"${ARGS[@]}"}
