"""Core: NARU's data, prompts, answer extraction, scoring, subsets and variants; pure Python (may import naru_eval.media; never lmms_eval, SDKs, torch or transformers)."""
