"""Shared test helpers: loopback stubs of remote APIs, tiny models, data and judge fixtures (no tests here)."""
