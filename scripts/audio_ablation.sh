#!/usr/bin/env bash
# What audio is worth: one model on naru_mcq_500 with frames only, frames + audio, audio only and
# the control (frames + another video's audio), then the paired comparisons per category.
#
#   scripts/audio_ablation.sh --model ADAPTER --model_args pretrained=Qwen/Qwen2.5-Omni-7B --out results/audio/q
#   (the commands for each omni adapter, Gemini and a vLLM server: docs/adapters.md, "The soundtrack")
#
# Each arm goes to OUT/<arm>/ (lmms-eval's output directory), with the arm's model args appended:
#   frames        audio=false                           input mode video
#   frames_audio  audio=true                            input mode video+audio
#   audio         audio=true,video=false                input mode audio (the frames' own windows)
#   control       audio=true,audio_source=other         input mode video+audio, variant audio_source=other
# (An adapter whose provider takes the soundtrack natively with the video, Gemini: frames and
# frames_audio only; which arms an adapter has is read from its args.) The runs share one
# response store (OUT/responses.sqlite): the arms are different requests, and a rerun asks only
# what is not answered yet; an arm whose run is complete (naru-eval verify-run) is skipped.
# Then OUT/compare/*.json: naru-eval compare, paired per question and per category with
# video-clustered CIs and permutation p-values (C.1 and C.5 first in the printed table), and
# OUT/leaderboard.json with every arm as its own entry (the input mode a column).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/audio_ablation.sh --model MODEL [--model_args ARGS] --out OUT [options] [-- LMMS_EVAL_ARGS...]

  --model M        lmms-eval --model: an adapter with an `audio` arg (`naru-eval adapters` lists
                   each adapter's inputs)
  --model_args A   lmms-eval --model_args, without audio=/video=/audio_source= (the arms set them)
  --out OUT        output root (required)
  --arms LIST      comma-separated arms (default: every arm the adapter's args allow: frames,
                   frames_audio, audio and control; frames and frames_audio where the provider
                   takes the soundtrack natively)
  --tasks LIST     lmms-eval tasks (default: naru_mcq_500)
  --label NAME     the model's name on the leaderboard (default: pretrained=/model= of the args)
  --launcher CMD   how lmms-eval is started (default: lmms-eval)
  --python PY      python with naru-eval installed (default: $PYTHON, else the one next to lmms-eval)
  --dry-run        print what would run and run nothing
  -h, --help       this help
  -- ARGS...       passed to lmms-eval as they are (e.g. -- --limit 20)

Environment: NARU_DATA_DIR or NARU_HF_DATASET (the data, required); NARU_RESPONSE_STORE (default
OUT/responses.sqlite); NARU_FRAME_CACHE (default OUT/frames; the audio cache is under it).
Exit status: 0 when every arm is complete and compared, 1 on a failure, 2 on a usage error.
EOF
}

die() { echo "audio_ablation: error: $1" >&2; exit "${2:-1}"; }

MODEL="" MODEL_ARGS="" OUT="" ARMS="" TASKS="naru_mcq_500" LABEL="" LAUNCHER="" PY="${PYTHON:-}" DRY=0
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a value}"; shift 2 ;;
    --model_args|--model-args) MODEL_ARGS="${2?--model_args needs a value}"; shift 2 ;;
    --out|--output_path) OUT="${2:?--out needs a value}"; shift 2 ;;
    --arms) ARMS="${2:?--arms needs a value}"; shift 2 ;;
    --tasks) TASKS="${2:?--tasks needs a value}"; shift 2 ;;
    --label) LABEL="${2:?--label needs a value}"; shift 2 ;;
    --launcher) LAUNCHER="${2:?--launcher needs a value}"; shift 2 ;;
    --python) PY="${2:?--python needs a value}"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "audio_ablation: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$MODEL" ]] || { usage >&2; die "--model is required" 2; }
[[ -n "$OUT" ]] || { usage >&2; die "--out is required" 2; }
if [[ "$MODEL_ARGS" =~ (^|,)(audio|video|audio_source)= ]]; then
  die "--model_args sets ${BASH_REMATCH[2]}=; the arms set audio=, video= and audio_source= themselves" 2
fi
if [[ -z "$PY" ]]; then
  LMMS="$(command -v lmms-eval || true)"
  if [[ -n "$LMMS" && -x "$(dirname "$LMMS")/python" ]]; then PY="$(dirname "$LMMS")/python"; else PY=python3; fi
fi
# the arms the adapter's args allow: audio= (frames, frames_audio), and video= and audio_source=
# when naru-eval decodes the soundtrack itself (audio, control)
ALLOWED="$("$PY" - "$MODEL" <<'PYEOF'
import sys
from naru_eval.adapters.registry import adapter_class
fields = adapter_class(sys.argv[1]).Args.model_fields
arms = ["frames", "frames_audio"] if "audio" in fields else []
arms += ["audio", "control"] if {"video", "audio_source"} <= set(fields) else []
print(",".join(arms))
PYEOF
)" || die "cannot read the arguments of $MODEL (is naru-eval installed for $PY?)"
[[ -n "$ALLOWED" ]] || die "$MODEL has no audio= argument: it cannot hear the video" 2
[[ -n "$ARMS" ]] || ARMS="$ALLOWED"
arm_args() {
  case "$1" in
    frames) echo "audio=false" ;;
    frames_audio) echo "audio=true" ;;
    audio) echo "audio=true,video=false" ;;
    control) echo "audio=true,audio_source=other" ;;
    *) die "unknown arm $1 (frames, frames_audio, audio, control)" 2 ;;
  esac
}
IFS=, read -r -a ARM_LIST <<<"$ARMS"
for arm in "${ARM_LIST[@]}"; do
  arm_args "$arm" >/dev/null
  [[ ",$ALLOWED," == *",$arm,"* ]] || die "$MODEL has no arm $arm (its args allow: $ALLOWED)" 2
done
NARU=("$PY" -m naru_eval.cli)
[[ -n "$LAUNCHER" ]] || LAUNCHER="lmms-eval"
[[ -n "${NARU_DATA_DIR:-}${NARU_HF_DATASET:-}" ]] || die "set NARU_DATA_DIR (or NARU_HF_DATASET)" 2
export NARU_RESPONSE_STORE="${NARU_RESPONSE_STORE:-$OUT/responses.sqlite}"
export NARU_FRAME_CACHE="${NARU_FRAME_CACHE:-$OUT/frames}"
mkdir -p "$OUT/compare"

run() {  # the command, printed first (model args carry no secrets: the adapters refuse them)
  echo "+ $*" >&2
  if [[ "$DRY" == 0 ]]; then "$@"; fi
}

for arm in "${ARM_LIST[@]}"; do
  dir="$OUT/$arm"
  args="$(arm_args "$arm")"
  [[ -n "$MODEL_ARGS" ]] && args="$MODEL_ARGS,$args"
  if [[ "$DRY" == 0 ]] && "${NARU[@]}" verify-run "$dir" >/dev/null 2>&1; then
    echo "audio_ablation: $arm is complete ($dir), skipped" >&2
    continue
  fi
  # shellcheck disable=SC2086
  run $LAUNCHER --model "$MODEL" --model_args "$args" --tasks "$TASKS" --output_path "$dir" --log_samples "${EXTRA[@]}"
  run "${NARU[@]}" verify-run "$dir"
done

has() { [[ ",$ARMS," == *",$1,"* ]]; }
IFS=, read -r -a TASK_LIST <<<"$TASKS"
for task in "${TASK_LIST[@]}"; do
  compare() {  # A B name [--across-inputs]
    run "${NARU[@]}" compare "$OUT/$1" "$OUT/$2" --task "$task" ${4:+"$4"} -o "$OUT/compare/${task}_$3.json"
  }
  if has frames && has frames_audio; then compare frames frames_audio frames_vs_frames_audio --across-inputs; fi
  if has frames_audio && has control; then compare control frames_audio control_vs_frames_audio; fi
  if has frames && has audio; then compare audio frames audio_vs_frames --across-inputs; fi
  if has audio && has frames_audio; then compare audio frames_audio audio_vs_frames_audio --across-inputs; fi
done
lb=("${NARU[@]}" leaderboard)
for arm in "${ARM_LIST[@]}"; do lb+=("$OUT/$arm"); done
if [[ -n "$LABEL" ]]; then
  for arm in "${ARM_LIST[@]}"; do lb+=(--label "$OUT/$arm=$LABEL"); done
fi
run "${lb[@]}" -o "$OUT/leaderboard.json" --no-plots
echo "audio_ablation: done; comparisons in $OUT/compare/, leaderboard $OUT/leaderboard.json" >&2
