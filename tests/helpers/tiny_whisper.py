"""A tiny random-initialised Whisper checkpoint, written to disk with a locally trained tokenizer.

Built from ``WhisperConfig`` with small widths (d_model 64, one encoder and one decoder layer)
but Whisper's real geometry where it matters: 80 mel bins, 30-s windows (3,000 feature frames,
1,500 encoder positions), the special tokens and 1,501 timestamp tokens (``<|0.00|>`` …
``<|30.00|>``, 0.02 s apart) right after ``<|notimestamps|>``, and a generation config that
names them (``no_timestamps_token_id``, ``lang_to_id``, ``task_to_id``), so transformers' real
long-form/timestamp machinery runs. The text it writes is junk; its timestamps, the chunking,
the caching and the resume around it are real. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.tiny_models import CORPUS

#: Whisper's special tokens in their real order, with only the languages the tests use
SPECIAL = [
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|ja|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nospeech|>",
    "<|notimestamps|>",
]
TIMESTAMPS = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]


def build_tiny_whisper(out: str | Path, vocab_size: int = 300) -> Path:
    """Write the checkpoint (model, tokenizer, feature extractor, processor) to ``out``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizerFast,
    )

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.save_pretrained(out / "_bpe")
    tokenizer = WhisperTokenizerFast(
        tokenizer_file=str(out / "_bpe" / "tokenizer.json"),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL[1:],
    )
    tokenizer.add_tokens(TIMESTAMPS)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL}
    assert tokenizer.convert_tokens_to_ids(TIMESTAMPS[0]) == ids["<|notimestamps|>"] + 1
    n_vocab = len(tokenizer)
    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=n_vocab,
        num_mel_bins=80,
        d_model=64,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|endoftext|>"],
        decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[],
        begin_suppress_tokens=[ids["<|endoftext|>"]],
    )
    model = WhisperForConditionalGeneration(config).eval()
    gen = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"],
        eos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids["<|startofprev|>"],
        lang_to_id={"<|en|>": ids["<|en|>"], "<|ja|>": ids["<|ja|>"]},
        task_to_id={"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        is_multilingual=True,
        max_initial_timestamp_index=50,
        max_length=448,
        suppress_tokens=[],
        begin_suppress_tokens=[ids["<|endoftext|>"]],
    )
    model.generation_config = gen
    model.save_pretrained(out)
    processor = WhisperProcessor(WhisperFeatureExtractor(feature_size=80), tokenizer)
    processor.save_pretrained(out)
    return out
