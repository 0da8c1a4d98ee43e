"""An image-text encoder that means something, and a video a question can be about.

:func:`build_colour_encoder` writes a real transformers SigLIP checkpoint (``SiglipModel`` +
``SiglipProcessor``: what ``select_encoder=`` loads) whose weights are set by hand, so that a
frame's embedding follows its colour and a colour word's embedding points at that colour:

- vision: one 32-px patch; the patch embedding maps the frame's mean (normalised) colour
  ``(r, g, b)`` to ``(r, g, b, -r, -g, -b, 0, 0)`` (mean zero, so the layer norms only scale it);
  every layer's output projections are zero (the residual carries it through) and the pooling
  head's attention passes its one token's value on unchanged;
- text: a word-level tokenizer; each colour word's embedding is that vector for its colour,
  every other token's zero; the one layer's attention averages the tokens (zero queries and keys)
  into every position, so the pooled (last) position holds the colour the text names.

So the cosine of a frame and a question is the cosine of their colours: blue with blue 1, with
red, green, white or yellow at most -1/3.

:func:`write_colour_video` writes an H.264 video whose colour changes every few seconds and shows
``target`` only in short segments away from where uniform sampling lands.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: colour -> its (r, g, b) in the processor's normalised range [-1, 1]
COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (1.0, -1.0, -1.0),
    "green": (-1.0, 1.0, -1.0),
    "blue": (-1.0, -1.0, 1.0),
    "white": (1.0, 1.0, 1.0),
    "yellow": (1.0, 1.0, -1.0),
}
DIM = 8
SIDE = 32


def _vector(rgb: tuple[float, float, float]) -> np.ndarray:
    r, g, b = rgb
    return np.array([r, g, b, -r, -g, -b, 0.0, 0.0], dtype=np.float32)


def build_colour_encoder(out: str | Path) -> Path:
    """The hand-set SigLIP (the module docstring), saved with its processor to ``out``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: 2 + i for i, w in enumerate(COLOURS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", model_max_length=16)
    processor = SiglipProcessor(
        image_processor=SiglipImageProcessor(size={"height": SIDE, "width": SIDE}), tokenizer=tokenizer
    )
    layer = {"hidden_size": DIM, "intermediate_size": DIM, "num_hidden_layers": 1, "num_attention_heads": 1}
    config = SiglipConfig(
        text_config={
            **layer,
            "vocab_size": len(vocab),
            "max_position_embeddings": 16,
            "projection_size": DIM,
            "pad_token_id": 0,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },  # fmt: skip
        vision_config={**layer, "image_size": SIDE, "patch_size": SIDE},
    )
    torch.manual_seed(0)
    model = SiglipModel(config).eval()
    eye = torch.eye(DIM)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("out_proj.weight", "fc2.weight")) and ".layers." in name:
                p.zero_()  # every layer leaves the residual as it is ...
            if name.endswith(("out_proj.bias", "fc2.bias", "position_embedding.weight")):
                p.zero_()
        # ... except the text layer's attention, which averages the tokens into every position
        attn = model.text_model.encoder.layers[0].self_attn
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight.zero_()
            proj.bias.zero_()
        attn.v_proj.weight.copy_(eye)
        attn.v_proj.bias.zero_()
        attn.out_proj.weight.copy_(eye)
        emb = model.text_model.embeddings.token_embedding.weight
        emb.zero_()
        for word, rgb in COLOURS.items():
            emb[vocab[word]] = torch.from_numpy(_vector(rgb))
        model.text_model.head.weight.copy_(eye)
        model.text_model.head.bias.zero_()
        # vision: the patch's mean colour, as the colour's vector
        conv = model.vision_model.embeddings.patch_embedding
        conv.weight.zero_()
        conv.bias.zero_()
        for c in range(3):
            conv.weight[c, c] = 1.0 / (SIDE * SIDE)
            conv.weight[3 + c, c] = -1.0 / (SIDE * SIDE)
        head = model.vision_model.head
        head.attention.in_proj_weight.zero_()
        head.attention.in_proj_weight[2 * DIM :] = eye  # the value: the token itself
        head.attention.in_proj_bias.zero_()
        head.attention.out_proj.weight.copy_(eye)
        head.attention.out_proj.bias.zero_()
        head.mlp.fc2.weight.zero_()
        head.mlp.fc2.bias.zero_()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


#: the target colour's segments (start, end seconds) of the colour video: 12 s of 120, none at the
#: centres of 8 equal stretches (7.5, 22.5, ..., 112.5 s), where uniform sampling at 8 frames lands
TARGET_SEGMENTS = ((25.0, 29.0), (60.0, 64.0), (88.0, 92.0))
BACKGROUND = ("red", "green", "white", "yellow")


def colour_at(t: float, target: str = "blue") -> str:
    """The colour the video shows at ``t`` seconds."""
    if any(a <= t < b for a, b in TARGET_SEGMENTS):
        return target
    return BACKGROUND[int(t // 5) % len(BACKGROUND)]


def write_colour_video(path: str | Path, seconds: int = 120, fps: int = 4, target: str = "blue") -> Path:
    """An H.264 video (64x64, ``fps``) of :func:`colour_at`'s colours."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps, options={"g": str(fps), "crf": "10"})
        s.width = s.height = 64
        s.pix_fmt = "yuv420p"
        for i in range(seconds * fps):
            rgb = np.array(COLOURS[colour_at(i / fps, target)], dtype=np.float64)
            img = np.broadcast_to(((rgb + 1) * 127.5).round().astype(np.uint8), (64, 64, 3)).copy()
            for packet in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    return path


def colour_of(frame: np.ndarray) -> str:
    """The colour (of :data:`COLOURS`) nearest a uint8 frame's mean."""
    mean = frame.reshape(-1, 3).mean(axis=0) / 127.5 - 1
    return min(COLOURS, key=lambda c: float(np.sum((np.array(COLOURS[c]) - mean) ** 2)))
