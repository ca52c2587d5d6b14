#!/usr/bin/env python3
"""Build a tiny, randomly initialised Qwen2-VL model directory, fully offline.

    python scripts/make_tiny_vlm.py OUT_DIR

The directory holds configs, a tokenizer, a chat template, the processor
config and random float32 weights (fixed seed, model.safetensors, ~6 MB), so
that `vllm serve OUT_DIR --dtype float32` and transformers run the very same
model: `cua check-logprobs` and training examples can compare the two. Answers
are garbage text (constrain them with structured outputs); it exists so tests
can run a real vLLM server on a CPU in seconds. Needs `transformers`,
`tokenizers` and `torch`.
"""
from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

VOCAB_SIZE = 1024
# Qwen2-VL's special tokens; they get ids 0..7 in this order.
SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
]
# Images are resized to 56x56 .. 448x448 pixels, i.e. 4 .. 256 image tokens
# (one token per 28x28 block: patch 14, spatial merge 2).
MIN_PIXELS = 56 * 56
MAX_PIXELS = 448 * 448
SEED = 0
# Weight std: transformers' default 0.02 gives nearly uniform next-token
# distributions (logits std ~0.2), which would hide a mismatch between two
# implementations; 0.1 makes the outputs depend visibly on every input token.
INIT_STD = 0.1

# Qwen chat format; each image part becomes <|vision_start|><|image_pad|><|vision_end|>
# (the processor expands <|image_pad|> to one token per 28x28 pixels). No "-" whitespace
# control: the newlines in the literals are part of the format.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] is not none %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] in ('image', 'image_url') or 'image' in part or 'image_url' in part %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] in ('video', 'video_url') or 'video' in part %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}{{ part['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _training_text(limit: int = 3_000_000):
    """Yield the standard library's source (sorted, capped) as tokenizer training text."""
    total = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        total += len(text)
        yield text
        if total >= limit:
            return


def build_tokenizer():
    """Byte-level BPE (like Qwen's), trained locally so no download is needed."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        model_max_length=32768, chat_template=CHAT_TEMPLATE,
    )


def build_config(vocab_size: int):
    from transformers import GenerationConfig, Qwen2VLConfig

    ids = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    text = dict(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1,  # head_dim 64
        max_position_embeddings=32768, rms_norm_eps=1e-6,
        # multimodal rope: sections (time, height, width) must sum to head_dim / 2
        rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]}, rope_theta=1000000.0,
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"], dtype="float32", initializer_range=INIT_STD,
    )
    vision = dict(
        depth=2, embed_dim=128, num_heads=2, mlp_ratio=4, hidden_size=128,  # = text hidden
        patch_size=14, spatial_merge_size=2, temporal_patch_size=2, in_channels=3,
        initializer_range=INIT_STD,
    )
    config = Qwen2VLConfig(
        text_config=text, vision_config=vision, dtype="float32", initializer_range=INIT_STD,
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    config.architectures = ["Qwen2VLForConditionalGeneration"]
    # No sampling defaults here: vLLM would apply them to every request.
    gen = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"], pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
    )
    return config, gen


def _update_json(path: Path, **items) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(items)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def save_weights(config, gen, out: Path) -> None:
    """Random float32 weights from a fixed seed; also writes config.json and generation_config.json."""
    import torch
    from transformers import Qwen2VLForConditionalGeneration

    torch.manual_seed(SEED)
    model = Qwen2VLForConditionalGeneration(config).to(torch.float32).eval()
    model.generation_config = gen
    model.save_pretrained(out)


def build(out_dir: str | Path) -> Path:
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config, gen = build_config(len(tokenizer))
    save_weights(config, gen, out)
    pixels = dict(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=14,
                  temporal_patch_size=2, merge_size=2)
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels),
        tokenizer=tokenizer, chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)  # tokenizer files, processor_config.json, template
    # Also the pre-v5 layout (preprocessor_config.json with min/max_pixels), which
    # older transformers and other tools read.
    processor.image_processor.save_pretrained(out)
    _update_json(out / "preprocessor_config.json", min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    # Some loaders read the template only from tokenizer_config.json: keep it there too.
    _update_json(out / "tokenizer_config.json", chat_template=CHAT_TEMPLATE)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = build(argv[0])
    print(f"tiny Qwen2-VL model written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
