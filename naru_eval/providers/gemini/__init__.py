"""Gemini: token and cost preflight, video preparation; may import core, media, store and api, never lmms_eval."""
