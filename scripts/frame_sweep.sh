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
# Each budget F gets OUT/fF/ (lmms-eval's output directory) with manifest.json (model, args
# without secrets, budget and its sampling label as the official NARU table prints it, "F Frames",
# package versions, git revision, data fingerprint, usage). Resumable:
# a budget whose run is complete is skipped; an unfinished one is run again and the response
# store (NARU_RESPONSE_STORE, default OUT/responses.sqlite) skips the questions already answered.
# lmms-eval 0.7.3 exits 0 even when the evaluation crashed (and on a full disk, leaving a complete
# results file beside a cut sample log), so each run is judged by its files (naru-eval
# sweep-status, the check of naru-eval verify-run): a fresh results file of this configuration,
# every question of each task, sample logs that parse with one line per question, metrics that
# recompute from them; anything less is a loud failure (exit 1).
# Every lmms-eval start is logged to OUT/sweep.log ("f=F invoke"). A sweep stopped by a signal
# (scancel, a SLURM time limit, preemption, Ctrl-C, kill) stops its lmms-eval and marks the budget
# "cancelled" in its manifest; one that dies otherwise while a budget runs marks it "failed".
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/frame_sweep.sh --model MODEL [--model_args ARGS] --out OUT [options] [-- LMMS_EVAL_ARGS...]

  --model M          lmms-eval --model (any adapter; `naru-eval adapters` lists them)
  --model_args A     lmms-eval --model_args; "{F}" is replaced by the budget, and num_frames=F is
                     appended (A must not set num_frames or fps itself)
  --out OUT          output root; budget F goes to OUT/fF/ (required)
  --budgets LIST     comma-separated frame budgets (default: 8,16,32,64,128)
  --index I          run only the I-th (0-based) budget of LIST; SLURM arrays pass $SLURM_ARRAY_TASK_ID
  --tasks LIST       lmms-eval tasks (default: naru_mcq_500)
  --open             also run the open-ended task naru_open
  --label NAME       the model's name on the leaderboard (default: pretrained=/model= of the args, else M)
  --launcher CMD     how lmms-eval is started (default: lmms-eval), e.g.
                     "accelerate launch --multi_gpu --num_processes 4 -m lmms_eval" (a launch that
                     would start fewer processes than --num_processes is refused)
  --python PY        python with naru-eval installed, for the manifest and checks (default:
                     $PYTHON, else the python next to lmms-eval, else the checkout's .venv, else python3)
  --store-per-budget one response store per budget, OUT/fF/responses.sqlite (SLURM arrays: SQLite
                     must not be shared across nodes over a network filesystem); it wins over an
                     exported NARU_RESPONSE_STORE unless that names a store per budget ("{F}")
  --quiet            lmms-eval's output goes to OUT/fF/lmms_eval.log only (default: also to the terminal)
  --dry-run          print what would run (secrets masked) and run nothing
  -h, --help         this help
  -- ARGS...         passed to lmms-eval as they are (e.g. -- --limit 20 --verbosity DEBUG)

Environment: NARU_DATA_DIR or NARU_HF_DATASET (the data, required); NARU_RESPONSE_STORE (default
OUT/responses.sqlite; "{F}" is replaced by the budget, "{rank}" by each process's rank);
NARU_FRAME_CACHE (default OUT/frames); PYTHON (see --python).
Exit status: 0 when every selected budget has a complete results file, 1 on the first failure,
2 on a usage error, 128+N when stopped by signal N.
EOF
}

die() { echo "frame_sweep: error: $1" >&2; exit "${2:-1}"; }

MODEL="" MODEL_ARGS="" OUT="" BUDGETS="8,16,32,64,128" INDEX="" TASKS="naru_mcq_500" OPEN=0
LABEL="" LAUNCHER="" PY="${PYTHON:-}" DRY=0 QUIET=0 STORE_PER_BUDGET=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a value}"; shift 2 ;;
    --model_args|--model-args) MODEL_ARGS="${2?--model_args needs a value}"; shift 2 ;;
    --out|--output_path) OUT="${2:?--out needs a value}"; shift 2 ;;
    --budgets) BUDGETS="${2:?--budgets needs a value}"; shift 2 ;;
    --index) INDEX="${2:?--index needs a value}"; shift 2 ;;
    --tasks) TASKS="${2:?--tasks needs a value}"; shift 2 ;;
    --open) OPEN=1; shift ;;
    --label) LABEL="${2:?--label needs a value}"; shift 2 ;;
    --launcher) LAUNCHER="${2:?--launcher needs a value}"; shift 2 ;;
    --python) PY="${2:?--python needs a value}"; shift 2 ;;
    --quiet) QUIET=1; shift ;;
    --store-per-budget) STORE_PER_BUDGET=1; shift ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "frame_sweep: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$MODEL" ]] || die "--model is required (see --help)" 2
[[ -n "$OUT" ]] || die "--out is required (see --help)" 2
if [[ $OPEN -eq 1 && ",$TASKS," != *",naru_open,"* ]]; then TASKS="$TASKS,naru_open"; fi
IFS=',' read -r -a ARG_PARTS <<< "$MODEL_ARGS"
for kv in ${ARG_PARTS[@]+"${ARG_PARTS[@]}"}; do
  k="${kv%%=*}"; k="${k// /}"
  case "${k,,}" in
    num_frames|fps) die "--model_args sets $k; the sweep sets num_frames=F itself" 2 ;;
  esac
done

IFS=',' read -r -a ALL_BUDGETS <<< "$BUDGETS"
for f in "${ALL_BUDGETS[@]}"; do [[ "$f" =~ ^[1-9][0-9]*$ ]] || die "budget '$f' is not a positive integer" 2; done
if [[ -n "$INDEX" ]]; then
  [[ "$INDEX" =~ ^[0-9]+$ && "$INDEX" -lt ${#ALL_BUDGETS[@]} ]] \
    || die "--index $INDEX is outside the ${#ALL_BUDGETS[@]} budget(s) ${BUDGETS} (a SLURM array larger than --budgets: \
naru-eval sweep submit derives --array from them)" 2
  SELECTED=("${ALL_BUDGETS[$INDEX]}")
else
  SELECTED=("${ALL_BUDGETS[@]}")
fi

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(dirname "$SCRIPT_DIR")"
# the python that has naru-eval, and how lmms-eval is started
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
if [[ -n "$LAUNCHER" ]]; then
  read -r -a LAUNCH <<< "$LAUNCHER"
elif [[ -n "${PYTHON:-}" ]]; then
  LAUNCH=("$PYTHON" -m lmms_eval)
elif command -v lmms-eval >/dev/null 2>&1; then
  LAUNCH=(lmms-eval)
else
  LAUNCH=("$PY" -m lmms_eval)
fi
# accelerate runs one process, silently, where --num_processes N lacks --multi_gpu on a node with
# fewer than two CUDA devices (or has --cpu): refuse before anything starts (naru_eval/lmms/launch.py)
if [[ " ${LAUNCH[*]} " == *accelerate* ]]; then
  "$PY" -m naru_eval.cli sweep check-launcher -- "${LAUNCH[@]}" || exit 2
fi

OUT_ABS="$("$PY" -c 'import os,sys; print(os.path.abspath(sys.argv[1]))' "$OUT")" \
  || die "cannot run $PY (pass --python, or install naru-eval)"
STORE_NOTICE=""
if [[ $STORE_PER_BUDGET -eq 1 ]]; then
  if [[ "${NARU_RESPONSE_STORE:-}" == *"{F}"* ]]; then
    STORE_TEMPLATE="$NARU_RESPONSE_STORE"  # the user's own store per budget (e.g. on local scratch)
  else
    STORE_TEMPLATE="$OUT_ABS/f{F}/responses.sqlite"
    if [[ -n "${NARU_RESPONSE_STORE:-}" ]]; then
      STORE_NOTICE="NARU_RESPONSE_STORE=$NARU_RESPONSE_STORE is ignored: --store-per-budget keeps one store per budget ($STORE_TEMPLATE); name one per budget with {F} to choose where"
    fi
  fi
else
  STORE_TEMPLATE="${NARU_RESPONSE_STORE:-$OUT_ABS/responses.sqlite}"
fi
export NARU_FRAME_CACHE="${NARU_FRAME_CACHE:-$OUT_ABS/frames}"
if [[ -z "${NARU_DATA_DIR:-}" && -z "${NARU_HF_DATASET:-}" && $DRY -eq 0 ]]; then
  die "set NARU_DATA_DIR (or NARU_HF_DATASET) to the NARU data; see docs/data.md" 2
fi

# k=v,... with secret-looking keys masked, for anything printed or logged
mask() {
  local out="" kv k parts=()
  IFS=',' read -r -a parts <<< "$1"
  for kv in ${parts[@]+"${parts[@]}"}; do
    k="${kv%%=*}"
    if [[ "$kv" == *=* && "${k,,}" =~ (key|token|secret|password|authorization) ]]; then kv="$k=***"; fi
    out+="${out:+,}$kv"
  done
  printf '%s' "$out"
}
mask_stream() {
  sed -u -E 's/([A-Za-z_]*(key|token|secret|password|authorization)[A-Za-z_]*=)[^,) '"'"'"]+/\1***/Ig'
}
log() {
  local line
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ) $*"
  [[ $DRY -eq 1 ]] || echo "$line" >> "$OUT_ABS/sweep.log"
  echo "frame_sweep: $*" >&2
}
quote() {  # shell words, single-quoted only where needed
  local w s="" q="'"
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./:=,@%+{}-]+$ ]]; then s+="$w "; else s+="$q${w//$q/$q\\$q$q}$q "; fi
  done
  printf '%s' "${s% }"
}

[[ $DRY -eq 1 ]] || mkdir -p "$OUT_ABS"
[[ -z "$STORE_NOTICE" ]] || log "notice: $STORE_NOTICE"

# A signal (scancel, a time limit, preemption: SIGTERM; Ctrl-C: SIGINT) stops lmms-eval and marks
# the running budget "cancelled"; any other exit while it runs marks it "failed".
CURRENT="" CHILD=""
kill_tree() {  # PID SIGNAL: the process and every descendant (children first)
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child" "$2"; done
  kill -"$2" "$1" 2>/dev/null || true
}
on_signal() {  # NAME NUMBER
  trap - EXIT
  if [[ -n "$CHILD" ]]; then kill_tree "$CHILD" TERM; wait "$CHILD" 2>/dev/null || true; fi
  if [[ -n "$CURRENT" ]]; then
    "$PY" -m naru_eval.cli sweep-manifest "$CURRENT" --status cancelled --message \
      "stopped by SIG$1 (scancel, a time limit, preemption or Ctrl-C) while lmms-eval ran; the same command resumes it from the response store" || true
    log "f=$F CANCELLED by SIG$1"
  fi
  exit $((128 + $2))
}
on_exit() {
  local rc=$?
  if [[ -n "$CURRENT" && $rc -ne 0 ]]; then
    "$PY" -m naru_eval.cli sweep-manifest "$CURRENT" --status failed --message "the sweep exited with status $rc while this budget ran" || true
  fi
}
trap 'on_signal TERM 15' TERM
trap 'on_signal INT 2' INT
trap 'on_signal HUP 1' HUP
trap on_exit EXIT
export SWEEP_MODEL="$MODEL" SWEEP_TASKS="$TASKS" SWEEP_LABEL="$LABEL" SWEEP_REPO="$REPO_DIR"
export SWEEP_LAUNCHER="${LAUNCH[*]}"
SWEEP_EXTRA="$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' ${EXTRA[@]+"${EXTRA[@]}"})" \
  || die "cannot run $PY (pass --python, or install naru-eval)"
export SWEEP_EXTRA

for F in "${SELECTED[@]}"; do
  DIR="$OUT_ABS/f$F"
  ARGS="${MODEL_ARGS//\{F\}/$F}"
  ARGS="${ARGS:+$ARGS,}num_frames=$F"
  export SWEEP_MODEL_ARGS="$ARGS" SWEEP_BUDGET="$F"
  SAMPLING="$F Frames"  # the official leaderboard's label of a num_frames=F run
  export NARU_RESPONSE_STORE="${STORE_TEMPLATE//\{F\}/$F}"
  CMD=("${LAUNCH[@]}" --model "$MODEL" --model_args "$ARGS" --tasks "$TASKS" --output_path "$DIR"
       --log_samples --batch_size 1 ${EXTRA[@]+"${EXTRA[@]}"})

  set +e
  # complete: every sample log parses, one line per question, metrics recompute (else 3: run it
  # again, e.g. results beside a log cut by a full disk)
  STATUS_MSG="$("$PY" -m naru_eval.cli sweep-status "$DIR" 2>&1)"
  CODE=$?
  set -e
  case $CODE in
    0)
      log "f=$F skip: complete ($STATUS_MSG)"
      # a sweep killed between lmms-eval's end and the manifest update: record the run as done
      [[ $DRY -eq 1 ]] || "$PY" -m naru_eval.cli sweep-manifest "$DIR" --status "done" --if-not-done \
        --message "complete results found on a later sweep" || true
      continue ;;
    3) ;;
    4) die "f=$F: $STATUS_MSG" ;;
    *) die "f=$F: cannot check $DIR: $STATUS_MSG" ;;
  esac

  SHOWN=("${LAUNCH[@]}" --model "$MODEL" --model_args "$(mask "$ARGS")" --tasks "$TASKS" --output_path "$DIR"
         --log_samples --batch_size 1 ${EXTRA[@]+"${EXTRA[@]}"})
  if [[ $DRY -eq 1 ]]; then
    echo "# f=$F [$SAMPLING] ($STATUS_MSG)"
    echo "$(quote "NARU_RESPONSE_STORE=$NARU_RESPONSE_STORE" "NARU_FRAME_CACHE=$NARU_FRAME_CACHE") $(quote "${SHOWN[@]}")"
    continue
  fi

  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  if command -v flock >/dev/null 2>&1; then
    flock -n 9 || die "f=$F: $DIR is locked by another sweep process"
  fi
  "$PY" -m naru_eval.cli sweep-manifest "$DIR" --status running || die "f=$F: cannot write $DIR/manifest.json"
  CURRENT="$DIR"
  START=$(date +%s)
  log "f=$F invoke [$SAMPLING]: $(quote "${SHOWN[@]}")"
  set +e
  # lmms-eval prints model_args: secrets are masked on their way to the log and the terminal. It
  # runs in the background so that a signal reaches the trap at once (bash runs traps between
  # commands, and `wait` is one); the subshell's status is lmms-eval's.
  if [[ $QUIET -eq 1 ]]; then
    ( "${CMD[@]}" 2>&1 | mask_stream >> "$DIR/lmms_eval.log"; exit "${PIPESTATUS[0]}" ) &
  else
    ( "${CMD[@]}" 2>&1 | mask_stream | tee -a "$DIR/lmms_eval.log"; exit "${PIPESTATUS[0]}" ) &
  fi
  CHILD=$!
  wait "$CHILD"
  RC=$?
  CHILD=""
  STATUS_MSG="$("$PY" -m naru_eval.cli sweep-status "$DIR" --since "$START" 2>&1)"
  CODE=$?
  set -e
  SECONDS_TAKEN=$(( $(date +%s) - START ))
  if [[ $RC -ne 0 || $CODE -ne 0 ]]; then
    MSG="lmms-eval exited $RC; $STATUS_MSG"
    "$PY" -m naru_eval.cli sweep-manifest "$DIR" --status failed --seconds "$SECONDS_TAKEN" --message "$MSG" || true
    CURRENT=""
    log "f=$F FAILED: $MSG"
    {
      echo "frame_sweep: f=$F FAILED: no complete results file in $DIR ($MSG)."
      echo "lmms-eval 0.7.3 exits 0 even when the evaluation crashed; the last lines of $DIR/lmms_eval.log:"
      tail -n 40 "$DIR/lmms_eval.log" | sed 's/^/  | /'
    } >&2
    exit 1
  fi
  "$PY" -m naru_eval.cli sweep-manifest "$DIR" --status "done" --seconds "$SECONDS_TAKEN"
  CURRENT=""
  log "f=$F [$SAMPLING] done in ${SECONDS_TAKEN}s: $STATUS_MSG"
  exec 9>&-
done
[[ $DRY -eq 1 ]] || log "sweep finished: budgets ${SELECTED[*]} in $OUT_ABS"
