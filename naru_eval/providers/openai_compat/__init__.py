"""The OpenAI-compatible servers (vLLM, SGLang, ...) as the ``model_adapters/openai_compat.py``
adapter talks to them: its typed args (``args``), the served model's family read from its name
(``served``), the wire form of a question (``wire``) and the server-recipe checks before the first
question (``preflight``). The one client and the usage reading are ``naru_eval.api.openai_client``."""
