"""Store: the SQLite stores (responses, judge cache, Gemini upload registry) behind one opener; may import naru_eval.core, never lmms_eval or SDKs."""
