"""``Checkpoint``: where a transformers checkpoint goes and how it is loaded.

The one home of the loading concern of the open-weight families, composed into the adapter
(:class:`naru_eval.adapters.hf.base.HFVideoModel`): the placement (one device, ``device_map``
sharding, or one whole copy per process under ``accelerate launch``), the dtype, the attention
implementation, the transformers class that loads the checkpoint's ``model_type`` (the family's
``Family.checkpoints``), the ``from_pretrained`` calls, and moving inputs onto the model's device.

What varies by family is derived, not overridden:

- a published omni checkpoint (thinker, talker and vocoder: its config has a ``thinker_config``)
  declared with a thinker class loads its thinker alone (transformers' conversion mapping strips
  the weights' ``thinker.`` prefix; a thinker weight left missing stops the run), a thinker-only
  checkpoint as it is;
- a remote-code checkpoint (declared class ``AutoModel``, ``trust_remote_code``) loads with its
  tokenizer as the processor (its own ``chat()`` builds the inputs);
- a pre-quantized checkpoint transformers cannot load (ModelOpt, NVFP4) is refused with the way
  to run it (a vLLM server and ``naru_openai_compat``);
- a family's ``from_pretrained`` extras come from its builder (``InputBuilder.load_kwargs``).

Nothing is loaded when the adapter is made: the processor and the weights are built on first
use (:meth:`Checkpoint.ensure_loaded`), so a run whose answers are all in the response store
never loads a model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from loguru import logger

from naru_eval.adapters.args import HFArgs
from naru_eval.core.sharding import world_size_from_env

if TYPE_CHECKING:
    import torch
    from accelerate import Accelerator
    from transformers import PretrainedConfig

#: the declared class of a checkpoint that runs its own code (its ``chat()``), not a transformers class
REMOTE_CODE_CLASS = "AutoModel"


class PretrainedKwargs(TypedDict, total=False):
    """What every ``from_pretrained`` of the checkpoint (config, processor, model) is given."""

    revision: str
    trust_remote_code: bool


@dataclass(frozen=True)
class Placement:
    """Where the model goes: its device and ``device_map``, and under ``accelerate launch`` the
    Accelerator, this process's rank and the number of processes."""

    device: torch.device
    device_map: str | dict[str, str] | None
    accelerator: Accelerator | None = None
    rank: int = 0
    world_size: int = 1


def placement(model_id: str, device: str | None, device_map: str | None) -> Placement:
    """The placement of a checkpoint for ``device`` / ``device_map`` in this process."""
    import torch

    world = world_size_from_env()
    if world > 1:
        # accelerate launch: data parallel, one whole model per process, on its own GPU
        # (cuda:LOCAL_RANK), or on the CPU with device=cpu or without CUDA (gloo between them).
        from accelerate import Accelerator

        on_cpu = torch.device(device).type == "cpu" if device else not torch.cuda.is_available()
        accelerator = Accelerator(cpu=on_cpu)
        local = accelerator.local_process_index
        dev = torch.device("cpu") if on_cpu else torch.device(f"cuda:{local}")
        rank = accelerator.process_index
        if device_map not in (None, "", "none") or (device not in (None, "cuda") and not on_cpu):
            logger.warning(
                f"{model_id}: device={device}, device_map={device_map} ignored under accelerate launch "
                f"(WORLD_SIZE={world}); rank {rank} uses {dev}"
            )
        return Placement(dev, {"": str(dev)}, accelerator, rank, accelerator.num_processes)
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    # device_map=auto (or balanced, sequential, a JSON map) shards a large checkpoint over the
    # visible GPUs; otherwise the whole model goes to `device`.
    return Placement(dev, device_map if device_map else str(dev))


class Checkpoint:
    """One transformers checkpoint of a family: placement, dtype, class, loading (module docstring)."""

    def __init__(
        self,
        model_id: str,
        args: HFArgs,
        classes: Mapping[str, str],
        extra_kwargs: Callable[[], dict[str, Any]] = dict,
    ) -> None:
        self.model_id = model_id
        self.pretrained = args.pretrained
        self.dtype_name = args.dtype
        self.attn_implementation = args.attn_implementation
        self.trust_remote_code = args.trust_remote_code
        self.revision = args.revision
        #: ``config.model_type`` -> the transformers class that loads it (the family's checkpoints)
        self.classes = classes
        self.extra_kwargs = extra_kwargs
        self.placement = placement(model_id, args.device, args.device_map)
        self.model: Any = None
        self.processor: Any = None

    @property
    def device(self) -> torch.device:
        return self.placement.device

    @property
    def input_device(self) -> torch.device:
        """Where inputs go: the model's first device (also under device_map=auto)."""
        dev = getattr(self.model, "device", None)
        return dev if dev is not None else self.device

    # -- loading ------------------------------------------------------------------------------
    def torch_dtype(self) -> torch.dtype | Literal["auto"]:
        """The checkpoint's dtype (``auto``) or the torch dtype named (refused at parse time when
        it is not one of ``naru_eval.adapters.args.HFArgs.dtype``'s)."""
        import torch

        return "auto" if self.dtype_name == "auto" else getattr(torch, self.dtype_name)

    def pretrained_kwargs(self) -> PretrainedKwargs:
        kw: PretrainedKwargs = {}
        if self.revision:
            kw["revision"] = self.revision
        if self.trust_remote_code:
            kw["trust_remote_code"] = True
        return kw

    def config(self) -> PretrainedConfig:
        import transformers

        return transformers.AutoConfig.from_pretrained(self.pretrained, **self.pretrained_kwargs())

    def class_name(self, config: PretrainedConfig) -> str:
        """The declared class of ``config``'s ``model_type`` (a checkpoint of another type, or a
        pre-quantized one transformers cannot load, is refused by name)."""
        import transformers

        refuse_prequantized(self.model_id, self.pretrained, config, transformers.__version__)
        name = self.classes.get(config.model_type)
        if name is None:
            raise ValueError(
                f"{self.model_id}: {self.pretrained} is a {config.model_type!r} checkpoint; this adapter "
                f"loads {sorted(self.classes)}"
            )
        return name

    def model_class(self, name: str) -> Any:
        import transformers

        cls = getattr(transformers, name, None)
        if cls is None:
            raise ImportError(f"{self.model_id}: transformers {transformers.__version__} has no {name}")
        return cls

    def ensure_processor(self) -> Any:
        """The checkpoint's processor, built on first use (the model need not be loaded: a family
        may read its frame geometry before answering)."""
        if self.processor is None:
            from transformers import AutoProcessor

            self.processor = AutoProcessor.from_pretrained(self.pretrained, **self.pretrained_kwargs())
        return self.processor

    def load(self) -> None:
        """Build the processor and the model (called once, on first use)."""
        config = self.config()
        name = self.class_name(config)
        kw: dict[str, Any] = {"dtype": self.torch_dtype(), "device_map": self.placement.device_map}
        kw |= self.extra_kwargs()
        if self.attn_implementation:
            kw["attn_implementation"] = self.attn_implementation
        remote = self.pretrained_kwargs()
        if name == REMOTE_CODE_CLASS:  # its own chat() builds the inputs: the tokenizer is its processor
            from transformers import AutoModel, AutoTokenizer

            logger.info(f"{self.model_id}: loading AutoModel (remote code) from {self.pretrained} ({kw})")
            self.processor = AutoTokenizer.from_pretrained(self.pretrained, **remote)
            self.model = AutoModel.from_pretrained(self.pretrained, **kw, **remote).eval()
            return
        cls = self.model_class(name)
        self.ensure_processor()
        thinker = getattr(config, "thinker_config", None)
        if thinker is not None and "Thinker" in name:
            # a published omni checkpoint (thinker, talker, vocoder): its thinker alone
            logger.info(f"{self.model_id}: loading the thinker of {self.pretrained} as {cls.__name__} ({kw})")
            model, info = cls.from_pretrained(self.pretrained, config=thinker, output_loading_info=True, **kw, **remote)
            missing = list(info.get("missing_keys") or [])
            if missing:
                raise ValueError(
                    f"{self.model_id}: {self.pretrained}'s thinker left {len(missing)} weight(s) unloaded "
                    f"(e.g. {missing[:3]}): not a {cls.__name__} checkpoint"
                )
            self.model = model.eval()
            return
        logger.info(f"{self.model_id}: loading {cls.__name__} from {self.pretrained} ({kw})")
        self.model = cls.from_pretrained(self.pretrained, **kw, **remote).eval()

    def ensure_loaded(self) -> None:
        if self.model is None:
            self.load()

    # -- the loaded model's calling conventions ------------------------------------------------
    def to_device(self, inputs: Mapping[str, Any], model_dtype: tuple[str, ...] = ()) -> dict[str, Any]:
        """The processor's outputs on the model's input device (the model's forward kwargs):
        pixels (and the keys ``model_dtype`` names, e.g. an audio tower's features) take the
        model's dtype; ids, grids and timings keep theirs."""
        import torch

        dtype = getattr(self.model, "dtype", None)
        device = self.input_device
        batch = {}
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                floats = k.startswith("pixel_values") or k in model_dtype
                v = v.to(device=device, dtype=dtype) if floats and dtype else v.to(device)
            batch[k] = v
        return batch

    def cache_kwarg(self) -> str:
        """How this transformers names the cache argument (``cache`` from 5.2x, before it
        ``past_key_values``): the GPU image's transformers 5.17 has only the old name."""
        import inspect

        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    def context_tokens(self) -> int:
        """The language model's context (its config's ``max_position_embeddings``)."""
        config = self.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(text.max_position_embeddings)

    def empty_cache(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def refuse_prequantized(model_id: str, pretrained: str, config: PretrainedConfig, version: str) -> None:
    """A pre-quantized ModelOpt / FP4 checkpoint: transformers cannot load it (its NVFP4 quantizer
    only quantizes full-precision weights while loading, on Blackwell GPUs)."""
    quant = getattr(config, "quantization_config", None) or {}
    quant = quant if isinstance(quant, dict) else quant.to_dict()
    method = str(quant.get("quant_method", "")).lower()
    algo = str(quant.get("quant_algo", "")).lower()
    if method == "modelopt" or "fp4" in method or "fp4" in algo:
        raise ValueError(
            f"{model_id}: {pretrained} is a pre-quantized {quant.get('quant_algo') or method} checkpoint "
            f"({method}); transformers {version} cannot load pre-quantized NVFP4 weights (its nvfp4 quantizer "
            "only quantizes full-precision weights, on Blackwell GPUs). Serve it with vLLM and use --model "
            "naru_openai_compat (docs/adapters.md), with the family's official sampling; or load a BF16 checkpoint."
        )
