"""Tiny random-initialised checkpoints, written to disk, for each open-weight family.

Each builder writes a directory the adapters load through the real ``from_pretrained`` path
(``pretrained=<dir>``): a config, weights (``save_pretrained``), a byte-level BPE tokenizer trained
here with the ``tokenizers`` library, and the family's real processor (``save_pretrained``, with a
chat template of the family's shape). Nothing is downloaded. Models are a few hundred thousand
parameters (hidden 64, 2 layers, a one-block vision tower) and the processors resize frames to
56-64 px, so a generate over 4-8 frames takes well under a second on CPU.

MiniCPM-o-2.6 has no transformers-native class and its hub remote code cannot be had offline
(nor imported by transformers 5.x), so :func:`build_minicpm_o_stub` writes a *stand-in*
trust_remote_code checkpoint with MiniCPM-o's ``chat`` interface: it checks what the adapter
passes and answers with a summary of it, and exercises the real AutoModel/AutoTokenizer
remote-code loading path, not MiniCPM-o's network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

QWEN_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<think>",
    "</think>",
]
NEMOTRON_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<image>", "<img>", "</img>"]
GLM_SPECIAL = [
    "<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|begin_of_image|>",
    "<|end_of_image|>", "<|image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|video|>", "<think>", "</think>",
    "<answer>", "</answer>",
]  # fmt: skip
INTERNVL_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"]

CORPUS = [
    "You are a helpful assistant.",
    "Answer with the option's letter (A, B, C or D) from the given choices directly.",
    "A. The screen is red B. The screen is green C. The screen is blue D. The screen is yellow",
    "What colour fills segment 1? magenta cyan white black",
    "動画の第1区間で画面は何色ですか? 答えはAです。",
    "system user assistant Frame1: Frame2: seconds 0.5 1.0 2.5",
]

# The families' chat templates, reduced to what matters here: where the video goes.
QWEN2_5_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN3_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}"
)
INTERNVL_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for content in message['content'] %}{% if content['type'] == 'image' %}{{ '<IMG_CONTEXT>\n' }}"
    "{% elif content['type'] == 'video' %}{{ '<video>\n' }}{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{{'<|im_end|>\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}{% endif %}"
)

# Nemotron-3-Nano-Omni's template, reduced: the video item becomes <video> (the processor expands
# it), and the assistant turn opens the reasoning unless enable_thinking is false.
NEMOTRON_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<image>\n{% elif content['type'] == 'video' %}<video>\n"
    "{% elif content['type'] == 'audio' %}<so_embedding>\n"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% else %}<think>\n{% endif %}"
    "{% endif %}"
)

# GLM-4.1V's template, reduced: the video item is the processor's <|video|> inside its begin/end
# tokens; GLM-4.5V's switch puts an empty reasoning after the assistant tag when thinking is off
GLM_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|begin_of_image|><|image|><|end_of_image|>"
    "{% elif content['type'] == 'video' %}<|begin_of_video|><|video|><|end_of_video|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% endif %}{% endif %}"
)

TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "max_position_embeddings": 4096}


def train_tokenizer(special: Sequence[str], vocab_size: int = 400, **named: Any) -> Any:
    """A byte-level BPE trained on a few lines, wrapped as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", **named)


def _ids(tokenizer: Any, names: Sequence[str]) -> dict[str, int]:
    return {n: tokenizer.convert_tokens_to_ids(n) for n in names}


def _save(out: Path, model: Any, processor: Any) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _seeded() -> None:
    import torch

    torch.manual_seed(0)


#: the benchmark scale of the tiny Qwen2.5-VL (scripts/bench_throughput.py): a vision tower and
#: frame size big enough that the video dominates each request, as it does for the real models
#: (224x224 px frames: 64 tokens per 2-frame patch, so 128 frames are 4,096 video tokens against
#: ~50 of question; a 4-block, 256-wide vision tower over 256 patches a frame; a 4-layer,
#: 256-wide language model)
BENCH_QWEN2_5_VL: dict[str, Any] = {
    "max_side": 224,
    # 16 heads of 16: the head size (and so mrope_section) of the small one
    "text": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 16},
    "vision": {"depth": 4, "hidden_size": 256, "intermediate_size": 512, "num_heads": 4, "out_hidden_size": 256},
}


def build_qwen2_5_vl(
    out: str | Path,
    max_side: int = 112,
    text: dict[str, Any] | None = None,
    vision: dict[str, Any] | None = None,
) -> Path:
    """The tiny Qwen2.5-VL (``text``/``vision``: config overrides, ``max_side``: the processor's
    largest frame side; see :data:`BENCH_QWEN2_5_VL`)."""
    from transformers import (
        GenerationConfig,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    tok = train_tokenizer(QWEN_SPECIAL)
    ids = _ids(tok, QWEN_SPECIAL)
    size = {"shortest_edge": 56 * 56, "longest_edge": max_side * max_side}
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=size),
        video_processor=Qwen2VLVideoProcessor(size=size),
        tokenizer=tok,
        chat_template=QWEN2_5_TEMPLATE,
    )
    config = Qwen2_5_VLConfig(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            **(text or {}),
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [0],
            "tokens_per_second": 2,
            **(vision or {}),
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    _seeded()
    model = Qwen2_5_VLForConditionalGeneration(config)
    # Like the real checkpoint's, this generation_config samples by default (here hot enough to
    # vary between runs): the adapter must decode greedily anyway.
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=2.0,
        top_p=1.0,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    return _save(Path(out), model, processor)


def _qwen3_vision(out_hidden: int = 64) -> dict[str, Any]:
    return {
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "patch_size": 16,
        "out_hidden_size": out_hidden,
        "num_position_embeddings": 16,
        "deepstack_visual_indexes": [0],
    }


def _qwen3_processor(tok: Any) -> Any:
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    size = {"shortest_edge": 64 * 64, "longest_edge": 128 * 128}
    return Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(size=size, patch_size=16),
        video_processor=Qwen3VLVideoProcessor(size=size),
        tokenizer=tok,
        chat_template=QWEN3_TEMPLATE,
    )


def build_qwen3_vl(out: str | Path) -> Path:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tok = train_tokenizer(QWEN_SPECIAL)
    ids = _ids(tok, QWEN_SPECIAL)
    config = Qwen3VLConfig(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [4, 2, 2],
                "mrope_interleaved": True,
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config=_qwen3_vision(),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    _seeded()
    return _save(Path(out), Qwen3VLForConditionalGeneration(config), _qwen3_processor(tok))


def build_qwen3_5(out: str | Path) -> Path:
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    tok = train_tokenizer(QWEN_SPECIAL)
    ids = _ids(tok, QWEN_SPECIAL)
    config = Qwen3_5Config(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "layer_types": ["linear_attention", "full_attention"],
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
                "mrope_section": [2, 1, 1],
                "mrope_interleaved": True,
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config=_qwen3_vision(),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    _seeded()
    return _save(Path(out), Qwen3_5ForConditionalGeneration(config), _qwen3_processor(tok))


def build_internvl(out: str | Path) -> Path:
    from transformers import (
        GotOcr2ImageProcessor,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
        InternVLVideoProcessor,
    )

    tok = train_tokenizer(
        INTERNVL_SPECIAL,
        extra_special_tokens={
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
    )
    ids = _ids(tok, INTERNVL_SPECIAL)
    side, patch, downsample = 56, 14, 0.5
    seq = int((side // patch) ** 2 * downsample**2)  # tokens per frame: 4
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size={"height": side, "width": side}, max_patches=1),
        video_processor=InternVLVideoProcessor(size={"height": side, "width": side}),
        tokenizer=tok,
        image_seq_length=seq,
        chat_template=INTERNVL_TEMPLATE,
    )
    config = InternVLConfig(
        vision_config={
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "image_size": [side, side],
            "patch_size": [patch, patch],
        },
        text_config={
            **TEXT,
            "model_type": "qwen3",  # InternVL3.5's language model is Qwen3
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        image_token_id=ids["<IMG_CONTEXT>"],
        image_seq_length=seq,
        downsample_ratio=downsample,
    )
    _seeded()
    return _save(Path(out), InternVLForConditionalGeneration(config), processor)


#: what the scripted tiny GLM-4.1V-Thinking writes after its prompt: a letter inside the reasoning,
#: the reasoning's end, another inside its answer tag, then the end of its turn
GLM_SCRIPT = ("<think>", "A", "</think>", "<answer>", "C", "</answer>", "<|user|>")


def glm_text_ids(ids: dict[str, int]) -> dict[str, object]:
    """GLM-4.1V's language model's end and padding tokens (a turn ends at ``<|user|>`` too)."""
    return {"eos_token_id": [ids["<|endoftext|>"], ids["<|user|>"]], "pad_token_id": ids["<|endoftext|>"]}


def glm_token_ids(ids: dict[str, int]) -> dict[str, int]:
    """``Glm4vConfig``'s image and video token ids from a tokenizer's ``GLM_SPECIAL`` ids (the tiny
    model here and the GPU check's real-size one)."""
    return {
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "image_start_token_id": ids["<|begin_of_image|>"],
        "image_end_token_id": ids["<|end_of_image|>"],
        "video_start_token_id": ids["<|begin_of_video|>"],
        "video_end_token_id": ids["<|end_of_video|>"],
    }


def build_glm4v(out: str | Path, max_side: int = 112, script: Sequence[str] | None = GLM_SCRIPT) -> Path:
    """The tiny GLM-4.1V (``glm4v``): its real processor (the video processor's own frame size from a
    total-pixel budget over the frames, its ``<|end_of_image|>seconds`` timestamps), its M-RoPE.

    With ``script`` greedy decoding writes those tokens after the prompt (as the scripted Nemotron:
    the mixers' outputs zeroed, the vision tower and every layer still run), so the reading of a
    Thinking checkpoint's ``<think>…</think><answer>…</answer>`` is tested on a known completion."""
    import torch
    from transformers import (
        Glm4vConfig,
        Glm4vForConditionalGeneration,
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
    )

    tok = train_tokenizer(GLM_SPECIAL)
    ids = _ids(tok, GLM_SPECIAL)
    # a budget of 8 frames of max_side^2 over the whole video: more frames, smaller frames
    video_size = {"shortest_edge": 28 * 28, "longest_edge": 8 * max_side * max_side}
    processor = Glm4vProcessor(
        image_processor=Glm4vImageProcessor(size={"shortest_edge": 28 * 28, "longest_edge": max_side * max_side}),
        video_processor=Glm4vVideoProcessor(size=video_size),
        tokenizer=tok,
        chat_template=GLM_TEMPLATE,
    )
    config = Glm4vConfig(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [2, 1, 1],
                "partial_rotary_factor": 0.5,
            },
            **glm_text_ids(ids),
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "image_size": 56,
            "out_hidden_size": 64,
        },
        **glm_token_ids(ids),
    )
    _seeded()
    model = Glm4vForConditionalGeneration(config)
    if script:
        lm = model.model.language_model
        with torch.no_grad():
            for name, p in lm.named_parameters():
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    p.zero_()
            prompt_end = tok("<|assistant|>\n")["input_ids"][-1]  # the template's last token
            chain = [prompt_end, *(tok.convert_tokens_to_ids(t) for t in script)]
            emb, head = lm.get_input_embeddings().weight, model.lm_head.weight
            head.zero_()
            for k, (prev, nxt) in enumerate(zip(chain[:-1], chain[1:], strict=True)):
                emb[prev] = 0.0
                emb[prev, k] = 1.0
                head[nxt, k] = 10.0
    model.generation_config.update(**glm_text_ids(ids))
    return _save(Path(out), model, processor)


#: what the scripted tiny Nemotron writes after its prompt: a letter inside the reasoning, then
#: the reasoning's end, then its answer, then end of turn
NEMOTRON_SCRIPT = ("A", "</think>", "C", "<|im_end|>")


def nemotron_processor(tok: Any, patches: int = 1024) -> Any:
    """Nemotron-Omni's real processor classes over ``tok``; ``patches``: the video processor's
    ``video_target_num_patches`` (16-px patches per frame; the checkpoint's 1024, 2x2 pixel
    shuffle)."""
    from transformers import (
        NemotronH_Omni_Reasoning_V3ImageProcessor,
        NemotronH_Omni_Reasoning_V3Processor,
        NemotronH_Omni_Reasoning_V3VideoProcessor,
        ParakeetFeatureExtractor,
    )

    mean, std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    small = {"min_num_patches": 4, "max_num_patches": 16} if patches <= 16 else {}  # else the class's
    return NemotronH_Omni_Reasoning_V3Processor(
        image_processor=NemotronH_Omni_Reasoning_V3ImageProcessor(norm_mean=mean, norm_std=std, **small),
        video_processor=NemotronH_Omni_Reasoning_V3VideoProcessor(
            norm_mean=mean, norm_std=std, video_target_num_patches=patches
        ),
        tokenizer=tok,
        feature_extractor=ParakeetFeatureExtractor(),
        chat_template=NEMOTRON_TEMPLATE,
    )


#: Nemotron-Omni's sound tokens (a clip is ``<so_start>`` + ``<so_embedding>`` x N + ``<so_end>``)
NEMOTRON_AUDIO_SPECIAL = ["<so_start>", "<so_end>", "<so_embedding>"]


def build_nemotron_omni(out: str | Path, script: Sequence[str] | None = NEMOTRON_SCRIPT, audio: bool = False) -> Path:
    """A tiny ``nemotron_h_omni`` checkpoint: NemotronH text model (one Mamba-2, one MoE, one
    attention layer), a one-block RADIO vision tower, the real processor, video processor and
    Parakeet feature extractor; with ``audio`` also the sound branch (a one-layer Parakeet encoder,
    8x subsampling as the checkpoint's, and its projector) and the sound tokens.

    With ``script`` the weights are set so that greedy decoding writes those tokens after the
    prompt: every mixer's output projection is zeroed (each position's residual stream is then its
    own token embedding; the vision tower, EVS pruning and all layers still run), the prompt's
    last token and each scripted token get orthogonal embeddings, and the output head maps each
    to the next. The adapter's reasoning handling is then tested on a known completion.
    """
    import torch
    from transformers import NemotronH_Omni_Reasoning_V3, NemotronH_Omni_Reasoning_V3_Config

    special = NEMOTRON_SPECIAL + (NEMOTRON_AUDIO_SPECIAL if audio else [])
    named = {"video_token": "<video>", **({"audio_token": "<so_embedding>"} if audio else {})}
    tok = train_tokenizer(special, extra_special_tokens=named)
    ids = _ids(tok, special)
    processor = nemotron_processor(tok, patches=16)  # 4 tokens a tubelet (the real one: 1024 patches)
    sound: dict[str, Any] = {}
    if audio:
        sound = {
            "audio_config": {
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "subsampling_conv_channels": 8,
                "num_mel_bins": processor.feature_extractor.feature_size,
                "projection_hidden_size": 64,
                "projection_bias": True,
            },
            "audio_token_id": ids["<so_embedding>"],
        }
    config = NemotronH_Omni_Reasoning_V3_Config(
        vision_config={
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "patch_size": 16,
            "image_size": 64,
            "max_img_size": 128,
            "num_cls_tokens": 2,
            "num_registers": 1,
            "summary_idxs": [0, 1],
            "video_temporal_patch_size": 2,
        },
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 64,
            "layers_block_type": ["linear_attention", "moe", "full_attention"],
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 64,
            "ssm_state_size": 8,
            "mamba_num_heads": 4,
            "mamba_head_dim": 16,
            "n_groups": 1,
            "chunk_size": 16,
            "n_routed_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 32,
            "moe_shared_expert_intermediate_size": 32,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        projector_hidden_size=64,
        vision_hidden_size=32,
        image_token_id=ids["<image>"],
        video_token_id=tok.convert_tokens_to_ids("<video>"),
        video_pruning_rate=0.5,  # Efficient Video Sampling on: half the video tokens pruned
        **sound,
    )
    _seeded()
    model = NemotronH_Omni_Reasoning_V3(config)
    if script:
        lm = model.language_model
        with torch.no_grad():
            for name, p in lm.named_parameters():
                if name.endswith(("out_proj.weight", "o_proj.weight", "down_proj.weight", "down_proj")):
                    p.zero_()
            # the prompt ends with the template's "<think>\n": its last token starts the chain
            prompt_end = tok("<think>\n")["input_ids"][-1]
            chain = [prompt_end, *(tok.convert_tokens_to_ids(t) for t in script)]
            emb, head = lm.get_input_embeddings().weight, lm.lm_head.weight
            head.zero_()
            for k, (prev, nxt) in enumerate(zip(chain[:-1], chain[1:], strict=True)):
                emb[prev] = 0.0
                emb[prev, k] = 1.0
                head[nxt, k] = 10.0
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    return _save(Path(out), model, processor)


# --------------------------------------------------------------------------- Qwen-Omni thinkers

#: Qwen2.5-Omni's special tokens (its tokenizer names them so: the processor reads them off the
#: tokenizer as ``image_token``, ``audio_bos_token``, ...)
QWEN2_5_OMNI_SPECIAL = {
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
    "image_token": "<|IMAGE|>",
    "video_token": "<|VIDEO|>",
    "audio_token": "<|AUDIO|>",
}
QWEN3_OMNI_SPECIAL = {
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "audio_token": "<|audio_pad|>",
}


def _omni_template(special: dict[str, str]) -> str:
    """The Qwen-Omni chat templates, reduced to where media go: a video between the vision
    markers (the processor puts its audio inside them), audio alone between the audio markers."""
    v = f"{special['vision_bos_token']}{special['video_token']}{special['vision_eos_token']}"
    a = f"{special['audio_bos_token']}{special['audio_token']}{special['audio_eos_token']}"
    i = f"{special['vision_bos_token']}{special['image_token']}{special['vision_eos_token']}"
    return (
        "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
        "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for content in message['content'] %}"
        f"{{% if content['type'] == 'image' %}}{i}"
        f"{{% elif content['type'] == 'video' %}}{v}"
        f"{{% elif content['type'] == 'audio' %}}{a}"
        "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


def _omni_tokenizer(special: dict[str, str]) -> Any:
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *special.values(), "<think>", "</think>"]
    return train_tokenizer(names, extra_special_tokens=dict(special))


def _omni_ids(tok: Any, special: dict[str, str]) -> dict[str, int]:
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in special.items()}
    ids.update(_ids(tok, ["<|endoftext|>", "<|im_end|>"]))
    return ids


#: the tiny omni audio encoders: one layer, 32 wide, the real 128 mel bins
OMNI_AUDIO = {"encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64, "d_model": 32,
              "output_dim": 64, "num_mel_bins": 128}  # fmt: skip


def build_qwen2_5_omni(out: str | Path, position_id_per_seconds: int = 25, max_side: int = 112) -> Path:
    """A tiny Qwen2.5-Omni *thinker* checkpoint (``qwen2_5_omni_thinker``: text output only, no
    talker), written by ``save_pretrained`` with its real processor (Qwen2.5-Omni processor, Qwen2-VL
    video processor, Whisper feature extractor with 128 mel bins)."""
    from transformers import (
        GenerationConfig,
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    special = QWEN2_5_OMNI_SPECIAL
    tok = _omni_tokenizer(special)
    ids = _omni_ids(tok, special)
    size = {"shortest_edge": 56 * 56, "longest_edge": max_side * max_side}
    processor = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(size=size),
        video_processor=Qwen2VLVideoProcessor(size=size),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_omni_template(special),
    )
    config = Qwen2_5OmniThinkerConfig(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [0],
        },  # fmt: skip
        audio_config=OMNI_AUDIO,
        audio_token_index=ids["audio_token"],
        image_token_index=ids["image_token"],
        video_token_index=ids["video_token"],
        audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"],
        vision_start_token_id=ids["vision_bos_token"],
        vision_end_token_id=ids["vision_eos_token"],
        position_id_per_seconds=position_id_per_seconds,
    )
    _seeded()
    model = Qwen2_5OmniThinkerForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=2.0,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    return _save(Path(out), model, processor)


def build_qwen3_omni(out: str | Path, position_id_per_seconds: int = 13) -> Path:
    """A tiny Qwen3-Omni *thinker* checkpoint (``qwen3_omni_moe_thinker``: a 4-expert, top-2 MoE
    text model, no talker) with its real processor. ``position_id_per_seconds``: the config's
    (the checkpoint's is 13; the config class's default, 25, is what a config without it gets)."""
    from transformers import (
        GenerationConfig,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        Qwen3OmniMoeProcessor,
        Qwen3OmniMoeThinkerConfig,
        Qwen3OmniMoeThinkerForConditionalGeneration,
        WhisperFeatureExtractor,
    )

    special = QWEN3_OMNI_SPECIAL
    tok = _omni_tokenizer(special)
    ids = _omni_ids(tok, special)
    size = {"shortest_edge": 64 * 64, "longest_edge": 128 * 128}
    processor = Qwen3OmniMoeProcessor(
        image_processor=Qwen2VLImageProcessor(size=size, patch_size=16),
        video_processor=Qwen2VLVideoProcessor(size=size, patch_size=16),
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tok,
        chat_template=_omni_template(special),
    )
    config = Qwen3OmniMoeThinkerConfig(
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [4, 2, 2],
                "mrope_interleaved": True,
            },  # fmt: skip
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        },
        vision_config=_qwen3_vision(),
        audio_config={**OMNI_AUDIO, "downsample_hidden_size": 16},
        audio_token_id=ids["audio_token"],
        image_token_id=ids["image_token"],
        video_token_id=ids["video_token"],
        audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"],
        vision_start_token_id=ids["vision_bos_token"],
        vision_end_token_id=ids["vision_eos_token"],
        position_id_per_seconds=position_id_per_seconds,
    )
    _seeded()
    model = Qwen3OmniMoeThinkerForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        do_sample=True,
        temperature=2.0,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    )
    return _save(Path(out), model, processor)


# --------------------------------------------------------------------------- MiniCPM-o stand-in

_STUB_CONFIG = """
from transformers import PretrainedConfig


class MiniCPMOStubConfig(PretrainedConfig):
    model_type = "minicpmo"

    def __init__(self, init_vision=True, init_audio=True, init_tts=True, hidden_size=8, **kwargs):
        self.init_vision = init_vision
        self.init_audio = init_audio
        self.init_tts = init_tts
        self.hidden_size = hidden_size
        super().__init__(**kwargs)
"""

_STUB_MODEL = '''
"""A stand-in with MiniCPM-o-2.6's chat() interface (NOT the real model): it checks the call
the way the real remote code would consume it and answers with a summary of what it got."""
import numpy as np
import torch
from PIL import Image
from transformers import PreTrainedModel

from .configuration_minicpmo_stub import MiniCPMOStubConfig


class MiniCPMOStub(PreTrainedModel):
    config_class = MiniCPMOStubConfig
    base_model_prefix = "stub"

    def __init__(self, config):
        super().__init__(config)
        self.proj = torch.nn.Linear(3, config.hidden_size)
        self.calls = []
        self.post_init()

    def _init_weights(self, module):
        pass

    def chat(self, image=None, msgs=None, tokenizer=None, processor=None, max_new_tokens=2048,
             sampling=True, max_slice_nums=None, use_image_id=None, omni_input=False, **kwargs):
        assert self.config.init_vision and not self.config.init_tts
        assert tokenizer is not None and msgs and msgs[-1]["role"] == "user"
        content = msgs[-1]["content"]
        frames = [c for c in content if isinstance(c, Image.Image)]
        clips = [c for c in content if isinstance(c, np.ndarray)]
        texts = [c for c in content if isinstance(c, str) and c != "<unit>"]
        units = sum(1 for c in content if isinstance(c, str) and c == "<unit>")
        assert len(texts) == 1 and content[-1] == texts[0], "the media first, then the prompt"
        if clips:  # audio reaches chat() only with the audio encoder loaded, as 16 kHz mono floats
            assert self.config.init_audio and all(c.dtype == np.float32 and c.ndim == 1 for c in clips)
        if omni_input:  # the card's omni mode: <unit>, a frame, its audio, ...
            assert clips and units == len(frames) and content[0] == "<unit>"
            for i, c in enumerate(content[:-1]):
                if isinstance(c, str):
                    assert isinstance(content[i + 1], Image.Image), "each <unit> opens with its frame"
        else:
            assert units == 0 and content[: len(frames)] == frames, "frames first, then the prompt"
        audio_s = sum(len(c) for c in clips) / 16000
        self.calls.append({"frames": [(f.size, f.mode) for f in frames], "prompt": texts[0],
                           "sampling": sampling, "max_new_tokens": max_new_tokens, "omni_input": omni_input,
                           "audio_s": audio_s, "units": units,
                           "max_slice_nums": max_slice_nums, "use_image_id": use_image_id, **kwargs})
        if not frames:  # text-only or audio-only chat, as the real model allows
            return f"0 frames text {len(texts[0])} audio {audio_s:.2f}s"
        # what the real model computes on: pixels through a layer
        pix = torch.stack([torch.from_numpy(np.asarray(f, dtype=np.float32)).mean((0, 1)) for f in frames])
        score = self.proj(pix / 255.0).sum().item()
        w, h = frames[0].size
        return f"{len(frames)} frames {w}x{h} score {score:.3f}" + (f" audio {audio_s:.2f}s" if clips else "")
'''


def build_minicpm_o_stub(out: str | Path) -> Path:
    """A trust_remote_code checkpoint with MiniCPM-o-2.6's ``chat`` interface (a stand-in)."""
    import torch
    from safetensors.torch import save_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "configuration_minicpmo_stub.py").write_text(_STUB_CONFIG, encoding="utf-8")
    (out / "modeling_minicpmo_stub.py").write_text(_STUB_MODEL, encoding="utf-8")
    config = {
        "model_type": "minicpmo",
        "architectures": ["MiniCPMOStub"],
        "auto_map": {
            "AutoConfig": "configuration_minicpmo_stub.MiniCPMOStubConfig",
            "AutoModel": "modeling_minicpmo_stub.MiniCPMOStub",
        },
        "hidden_size": 8,
        "max_position_embeddings": 32768,
        "init_vision": True,
        "init_audio": True,
        "init_tts": True,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    _seeded()
    save_file({"proj.weight": torch.randn(8, 3), "proj.bias": torch.zeros(8)}, str(out / "model.safetensors"))
    train_tokenizer(QWEN_SPECIAL).save_pretrained(out)
    return out


#: adapter model id -> builder
#: checkpoint ``model_type`` -> the builder of a tiny checkpoint of that type
BY_MODEL_TYPE: dict[str, Callable[[str | Path], Path]] = {
    "qwen2_5_vl": build_qwen2_5_vl,
    "qwen3_vl": build_qwen3_vl,
    "qwen3_5": build_qwen3_5,
    "internvl": build_internvl,
    "minicpmo": build_minicpm_o_stub,
    "nemotron_h_omni": build_nemotron_omni,
    "qwen2_5_omni_thinker": build_qwen2_5_omni,
    "qwen3_omni_moe_thinker": build_qwen3_omni,
    "glm4v": build_glm4v,
}


#: checkpoint ``model_type`` -> the builder of a tiny checkpoint with its random weights intact, where
#: the default one is scripted (Nemotron's zeroes every mixer to answer a fixed text, so nothing it
#: answers depends on the cache: the shared-prefix comparisons need the raw one)
RAW_BY_MODEL_TYPE: dict[str, Callable[[str | Path], Path]] = {
    "nemotron_h_omni": lambda out: build_nemotron_omni(out, script=None),
    "glm4v": lambda out: build_glm4v(out, script=None),
}


def builders(table: dict[str, Callable[[str | Path], Path]] | None = None) -> dict[str, Callable[[str | Path], Path]]:
    """Adapter id -> the builder of its tiny checkpoint: the first ``model_type`` its family
    declares (``Family.checkpoints``) that has a builder, so a new family over a known
    ``model_type`` gets one with no edit here. ``table``: raw builders first (:data:`RAW_BY_MODEL_TYPE`)."""
    from naru_eval.adapters.registry import registered

    by_type = {**BY_MODEL_TYPE, **(table or {})}
    out = {}
    for model_id, entry in registered().items():
        build = next((by_type[t] for t in entry.checkpoints if t in by_type), None)
        if build is not None:
            out[model_id] = build
    return out


#: checkpoint ``model_type`` -> what its tiny checkpoint answers every question of an end-to-end
#: run with 4 frames of the synthetic 48x32 videos (a regular expression over the raw response),
#: and the letter read from it: the scripted checkpoints and the MiniCPM-o stand-in (which reports
#: what reached its chat()); the others answer at random
SCRIPTED_ANSWERS: dict[str, tuple[str, str | None]] = {
    "nemotron_h_omni": (r"<think>\nA\n</think>\n\nC", "C"),  # the letter after the reasoning
    "glm4v": (r"<think>\nA\n</think>\n\nC", "C"),  # the letter inside <answer>, never the reasoning's
    "minicpmo": (r"4 frames 48x32.*", None),
}

#: adapter id -> the builder of its tiny checkpoint (derived: :func:`builders`), and of its raw one
BUILDERS: dict[str, Callable[[str | Path], Path]] = builders()
RAW_BUILDERS: dict[str, Callable[[str | Path], Path]] = builders(RAW_BY_MODEL_TYPE)
