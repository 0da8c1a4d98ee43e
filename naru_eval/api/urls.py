"""The one check of an API endpoint URL (the OpenAI-compatible adapter, Gemini, the judge).

Model args and settings are recorded (lmms-eval writes ``model_args`` into ``results.json``;
the judge's settings go into its report), so a URL must never carry a secret: no
``user:password@`` and, where the API takes none, no query (``?key=...``). The key comes from
the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit


def check_endpoint(url: str, *, what: str = "base_url", key_env: Sequence[str] = (), query: bool = True) -> str:
    """``url`` when it is an http(s) URL without credentials (and, with ``query=False``, without
    a query); else a ValueError naming ``what`` and where the key comes from (``key_env``)."""
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL, got {url!r}")
    if parts.username or parts.password or (parts.query and not query):
        carried = "credentials (user:password@)" if query else "credentials (user:password@) or a query"
        source = f"; the key comes from {' / '.join(key_env)}" if key_env else ""
        raise ValueError(
            f"{what} must not carry {carried}: model args and settings are recorded (lmms-eval writes "
            f"model_args into results.json){source}"
        )
    return str(url)
