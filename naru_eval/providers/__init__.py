"""Providers: what is specific to one remote API (providers.gemini); may import core, media, store and api, never lmms_eval."""
