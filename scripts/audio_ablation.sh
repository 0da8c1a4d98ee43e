#!/usr/bin/env bash
# What audio is worth: one model on naru_mcq_500 with frames only, frames + audio, audio only and
# the control (frames + another video's audio), then the paired comparisons per category.
#
#   scripts/audio_ablation.sh --model ADAPTER --model_args pretrained=Qwen/Qwen2.5-Omni-7B --out results/audio/q
#   (the commands for each omni adapter, Gemini and a vLLM server: docs/adapters.md, "The soundtrack")
#
# The `audio` ablation of the one experiment driver (`naru-eval experiment run --ablation audio
# --leaderboard`, naru_eval/report/experiment.py declares its arms), through scripts/frame_sweep.sh
# (which finds the Python). Each arm goes to OUT/<arm>/ with the arm's model args appended:
#   frames        audio=false                           input mode video
#   frames_audio  audio=true                            input mode video+audio
#   audio         audio=true,video=false                input mode audio (the frames' own windows)
#   control       audio=true,audio_source=other         input mode video+audio, variant audio_source=other
# (An adapter whose provider takes the soundtrack natively with the video, Gemini: frames and
# frames_audio only; which arms an adapter has is read from its args.) Flags: --model,
# --model_args (without audio=/video=/audio_source=: the arms set them), --out, --arms LIST,
# --tasks, --label, --launcher, --python, --dry-run, -- LMMS_EVAL_ARGS. The runs share one response
# store (OUT/responses.sqlite): the arms are different requests, and a rerun asks only what is not
# answered yet; an arm whose run is complete (naru-eval verify-run's check) is skipped. Then
# OUT/compare/<task>_<A>_vs_<B>.json: naru-eval compare, paired per question and per category with
# video-clustered CIs and permutation p-values, and OUT/leaderboard.json with every arm as its own
# entry (the input mode a column). Exit status: 0 when every arm is complete and compared, 1 on a
# failure, 2 on a usage error.
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/frame_sweep.sh" --ablation audio --leaderboard "$@"
