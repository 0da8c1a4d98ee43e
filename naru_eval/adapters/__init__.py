"""The adapters' shared machinery: the base every adapter is (``base``: requests, the response
store, failures, the run loop), the one argument parser and the args models (``args``), a
family's declaration (``family``), the registry derived from the family modules (``registry``),
the generated docs tables (``docs``), the Qwen input rule (``qwen_sampling``) and the
transformers families' base (``hf``). The families themselves are the modules of
``model_adapters/``."""
