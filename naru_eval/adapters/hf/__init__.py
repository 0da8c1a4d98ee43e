"""The transformers families' machinery: the base (``base``: chat, processor inputs, generation),
loading and placement (``loading``), the shared video prefix (``prefix``), the position ids
(``positions``) and the Qwen families' shared part (``qwen``)."""
