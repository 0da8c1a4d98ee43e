"""API: calling remote models (retry classification, prices); may import naru_eval.core and naru_eval.store, never lmms_eval."""
