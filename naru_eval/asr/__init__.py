"""Speech recognition for the transcript input: ``naru-eval transcribe`` (Whisper through transformers).

Layered above ``media`` (the transcript form and its cache, :mod:`naru_eval.media.asr_cache`)
and ``core``; only the CLI imports it, so no evaluation run loads Whisper.
"""
