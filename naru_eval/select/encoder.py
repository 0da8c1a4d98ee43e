"""The image-text encoder a selector scores frames with: any transformers CLIP, SigLIP or SigLIP2
checkpoint (``select_encoder=``), loaded on first use, on the GPU where there is one.

Frames and texts are embedded by the checkpoint's own processor and its ``get_image_features`` /
``get_text_features``, L2-normalised, so a frame's similarity to a text is their cosine (SigLIP's
logit scale and bias are one increasing affine map of it: the selectors min-max normalise the
scores, so the frames chosen are the same). Texts are tokenised as the checkpoint was trained:
SigLIP's to its fixed length (``padding="max_length"``), CLIP's to the longest, both truncated.

The English-only CLIPs are allowed, and named as such (:attr:`Encoder.english_only`, in the run's
record): NARU's questions are Japanese, so the default is SigLIP2, which reads it. The weights'
fingerprint (:meth:`Encoder.fingerprint`: a hash of every tensor) is part of the pool cache's key
and of the run key: other weights choose other frames.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from loguru import logger

if TYPE_CHECKING:
    import numpy as np
    import torch


class ImageTextModel(Protocol):
    """What the selector uses of a CLIP/SigLIP/SigLIP2 model (transformers' ``CLIPModel``,
    ``SiglipModel``, ``Siglip2Model``: no common base class declares these)."""

    @property
    def device(self) -> torch.device: ...
    def get_image_features(self, **inputs: torch.Tensor) -> object: ...
    def get_text_features(self, **inputs: torch.Tensor) -> object: ...
    def state_dict(self) -> Mapping[str, torch.Tensor]: ...


class ImageTextProcessor(Protocol):
    """What the selector uses of the checkpoint's processor: its image call and its tokenizer."""

    tokenizer: object

    def __call__(self, *, images: list[np.ndarray], return_tensors: str) -> Mapping[str, torch.Tensor]: ...


#: the checkpoint families this encoder loads (``config.model_type``)
ENCODER_TYPES = ("clip", "siglip", "siglip2")


class EncoderError(ValueError):
    """A ``select_encoder`` that cannot be used (not a CLIP/SigLIP/SigLIP2 checkpoint, not found)."""


class Encoder:
    """One image-text checkpoint (the module docstring)."""

    def __init__(self, name: str, device: str | None = None) -> None:
        self.name = name
        self.device_name = device
        self._model: ImageTextModel | None = None
        self._processor: ImageTextProcessor | None = None
        self._model_type: str | None = None
        self._fingerprint: str | None = None

    # -- loading ------------------------------------------------------------------------------
    def load(self) -> None:
        """Load the checkpoint (once); a checkpoint of another kind is an :class:`EncoderError`."""
        if self._model is not None:
            return
        import torch
        from transformers import AutoConfig, AutoModel, AutoProcessor

        try:
            config = AutoConfig.from_pretrained(self.name)
        except (OSError, ValueError) as e:
            raise EncoderError(f"select_encoder={self.name!r} cannot be loaded ({type(e).__name__}: {e})") from None
        if config.model_type not in ENCODER_TYPES:
            raise EncoderError(
                f"select_encoder={self.name!r} is a {config.model_type!r} checkpoint; give a CLIP, SigLIP or SigLIP2 "
                f"one ({', '.join(ENCODER_TYPES)})"
            )
        device = self.device_name or ("cuda" if torch.cuda.is_available() else "cpu")
        self._model_type = str(config.model_type)
        self._processor = AutoProcessor.from_pretrained(self.name)
        self._model = AutoModel.from_pretrained(self.name, dtype=torch.float32).to(device).eval()
        if self.english_only:
            logger.warning(
                f"select_encoder={self.name} is an English-only CLIP: NARU's questions are Japanese (the record says so)"
            )

    @property
    def model(self) -> ImageTextModel:
        self.load()
        assert self._model is not None
        return self._model

    @property
    def processor(self) -> ImageTextProcessor:
        self.load()
        assert self._processor is not None
        return self._processor

    @property
    def english_only(self) -> bool:
        """CLIP's tokenizer and training text are English."""
        self.load()
        return self._model_type == "clip"

    def fingerprint(self) -> str:
        """A hash of every weight tensor (name, shape, dtype, bytes): the encoder's identity."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for name, tensor in sorted(self.model.state_dict().items()):
                t = tensor.detach().to("cpu").contiguous()
                h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
                h.update(t.numpy().tobytes() if t.dtype.is_floating_point is False else t.float().numpy().tobytes())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def describe(self) -> str:
        """``name`` and its weights' fingerprint (and ``english-only`` for a CLIP)."""
        return f"{self.name}@{self.fingerprint()}" + (" (english-only)" if self.english_only else "")

    # -- embeddings ---------------------------------------------------------------------------
    def images(self, frames: np.ndarray) -> np.ndarray:
        """The L2-normalised embeddings (float32, N x D) of uint8 N x H x W x 3 frames."""
        import numpy as np
        import torch

        if len(frames) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        given = self.processor(images=list(frames), return_tensors="pt")
        inputs = {k: v.to(self.model.device) for k, v in given.items()}
        with torch.inference_mode():
            out = self.model.get_image_features(**inputs)
        return _unit(getattr(out, "pooler_output", out))

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """The L2-normalised embeddings (float32, M x D) of ``texts``."""
        import torch

        tok = self.processor.tokenizer
        assert callable(tok)
        if self._model_type == "clip":
            given = tok(list(texts), padding=True, truncation=True, return_tensors="pt")
        else:  # SigLIP and SigLIP2 were trained on fixed-length text
            length = int(getattr(tok, "model_max_length", 64) or 64)
            given = tok(
                list(texts), padding="max_length", truncation=True, max_length=min(length, 64), return_tensors="pt"
            )
        inputs = {k: v.to(self.model.device) for k, v in given.items()}
        with torch.inference_mode():
            out = self.model.get_text_features(**inputs)
        return _unit(getattr(out, "pooler_output", out))


def _unit(x: object) -> np.ndarray:
    import numpy as np
    import torch

    assert isinstance(x, torch.Tensor)
    v = x.detach().float().cpu().numpy()
    return (v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)).astype(np.float32)
