"""``HFCheckpointModel``: where a transformers checkpoint goes and how it is loaded.

The one home of the loading concern of the open-weight families: the placement (one device,
``device_map`` sharding, or one whole copy per process under ``accelerate launch``), the dtype,
the attention implementation, the transformers class that loads the checkpoint's
``model_type``, the ``from_pretrained`` calls, and moving inputs onto the model's device.
:class:`naru_eval.adapters.hf.base.HFVideoModel` builds on it. The classes come from the
family's declaration (``Family.checkpoints``: ``model_type`` -> class); a family overrides
:meth:`HFCheckpointModel.model_class`, :meth:`HFCheckpointModel.load_kwargs` or, for a
remote-code checkpoint, :meth:`HFCheckpointModel.load`.

Nothing is loaded in ``__init__``: the processor and the weights are built on first use
(:meth:`HFCheckpointModel.ensure_loaded`), so a run whose answers are all in the response store
never loads a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict

from loguru import logger

from naru_eval.adapters.args import HFArgs
from naru_eval.adapters.base import NaruModel
from naru_eval.core.sharding import world_size_from_env


class PretrainedKwargs(TypedDict, total=False):
    """What every ``from_pretrained`` of the checkpoint (config, processor, model) is given."""

    revision: str
    trust_remote_code: bool


class HFCheckpointModel(NaruModel):
    """A ``NaruModel`` over one transformers checkpoint: placement, dtype, class and loading."""

    Args: ClassVar[type[HFArgs]] = HFArgs
    args: HFArgs

    def __init__(self, **model_args: Any) -> None:
        super().__init__(**model_args)
        args = self.args
        self.pretrained = args.pretrained
        self.dtype_name = args.dtype
        self.attn_implementation = args.attn_implementation
        self.trust_remote_code = args.trust_remote_code
        self.revision = args.revision
        self._setup_devices(args.device, args.device_map)
        self.model: Any = None
        self.processor: Any = None

    # -- placement --------------------------------------------------------------------------
    def _setup_devices(self, device: str | None, device_map: str | None) -> None:
        import torch

        world = world_size_from_env()
        if world > 1:
            # accelerate launch: data parallel, one whole model per process, on its own GPU
            # (cuda:LOCAL_RANK), or on the CPU with device=cpu or without CUDA (gloo between them).
            from accelerate import Accelerator

            on_cpu = torch.device(device).type == "cpu" if device else not torch.cuda.is_available()
            self.accelerator = Accelerator(cpu=on_cpu)
            local = self.accelerator.local_process_index
            self._device = torch.device("cpu") if on_cpu else torch.device(f"cuda:{local}")
            self.device_map: str | dict[str, str] | None = {"": str(self._device)}
            self._rank = self.accelerator.process_index
            self._world_size = self.accelerator.num_processes
            if device_map not in (None, "", "none") or (device not in (None, "cuda") and not on_cpu):
                logger.warning(
                    f"{self.model_id}: device={device}, device_map={device_map} ignored under accelerate launch "
                    f"(WORLD_SIZE={world}); rank {self._rank} uses {self._device}"
                )
            return
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(device)
        # device_map=auto (or balanced, sequential, a JSON map) shards a large checkpoint over
        # the visible GPUs; otherwise the whole model goes to `device`.
        self.device_map = device_map if device_map else str(self._device)

    @property
    def device(self) -> Any:
        return self._device

    @property
    def input_device(self) -> Any:
        """Where inputs go: the model's first device (also under device_map=auto)."""
        dev = getattr(self.model, "device", None)
        return dev if dev is not None else self._device

    # -- loading ------------------------------------------------------------------------------
    def _torch_dtype(self) -> Any:
        """The checkpoint's dtype (``auto``) or the torch dtype named (refused at parse time
        when it is not one of ``naru_eval.adapters.args.HFArgs.dtype``'s)."""
        import torch

        return "auto" if self.dtype_name == "auto" else getattr(torch, self.dtype_name)

    @property
    def model_classes(self) -> Mapping[str, str]:
        """``config.model_type`` -> the transformers class that loads it (the family's checkpoints)."""
        return self.family.checkpoints

    def _pretrained_kwargs(self) -> PretrainedKwargs:
        kw: PretrainedKwargs = {}
        if self.revision:
            kw["revision"] = self.revision
        if self.trust_remote_code:
            kw["trust_remote_code"] = True
        return kw

    def model_class(self) -> Any:
        """The transformers class for this checkpoint's ``model_type``."""
        import transformers

        config = transformers.AutoConfig.from_pretrained(self.pretrained, **self._pretrained_kwargs())
        name = self.model_classes.get(config.model_type)
        if name is None:
            raise ValueError(
                f"{self.model_id}: {self.pretrained} is a {config.model_type!r} checkpoint; this adapter "
                f"loads {sorted(self.model_classes)}"
            )
        cls = getattr(transformers, name, None)
        if cls is None:
            raise ImportError(f"{self.model_id}: transformers {transformers.__version__} has no {name}")
        return cls

    def load_kwargs(self) -> dict[str, Any]:
        """Extra ``from_pretrained`` keyword arguments of a family (config overrides)."""
        return {}

    def ensure_processor(self) -> Any:
        """The checkpoint's processor, built on first use (the model need not be loaded: a family
        may read its frame geometry before answering)."""
        if self.processor is None:
            from transformers import AutoProcessor

            self.processor = AutoProcessor.from_pretrained(self.pretrained, **self._pretrained_kwargs())
        return self.processor

    def load(self) -> None:
        """Build the processor and the model (called once, on first use)."""
        cls = self.model_class()
        kw: dict[str, Any] = {"dtype": self._torch_dtype(), "device_map": self.device_map, **self.load_kwargs()}
        if self.attn_implementation:
            kw["attn_implementation"] = self.attn_implementation
        logger.info(f"{self.model_id}: loading {cls.__name__} from {self.pretrained} ({kw})")
        self.ensure_processor()
        self.model = cls.from_pretrained(self.pretrained, **kw, **self._pretrained_kwargs()).eval()

    def ensure_loaded(self) -> None:
        if self.model is None:
            self.load()

    # -- the loaded model's calling conventions ------------------------------------------------
    def _to_device(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The processor's outputs on the model's input device (the model's forward kwargs)."""
        import torch

        dtype = getattr(self.model, "dtype", None)
        device = self.input_device
        batch = {}
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                # pixels take the model's dtype; ids, grids and timings keep theirs
                v = v.to(device=device, dtype=dtype) if k.startswith("pixel_values") and dtype else v.to(device)
            batch[k] = v
        return batch

    def _cache_kwarg(self) -> str:
        """How this transformers names the cache argument (``cache`` from 5.2x, before it
        ``past_key_values``): the GPU image's transformers 5.17 has only the old name."""
        import inspect

        params = inspect.signature(self.model.forward).parameters
        return "cache" if "cache" in params else "past_key_values"

    def _empty_cache(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
