"""scripts/make_tiny_vlm.py builds a loadable tiny Qwen2-VL directory offline (no server here)."""
import json

import pytest
import transformers
from helpers.models import build_tiny_vlm
from PIL import Image

pytestmark = pytest.mark.slow  # torch and transformers


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_vlm(tmp_path_factory.mktemp("tinyvlm") / "model")


def _json(d, name):
    return json.loads((d / name).read_text())


def test_files_and_config(model_dir):
    for name in ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "preprocessor_config.json", "processor_config.json"]:
        assert (model_dir / name).is_file(), name
    assert (model_dir / "model.safetensors").is_file(), "random weights, the same for vLLM and transformers"

    cfg = _json(model_dir, "config.json")
    assert cfg["architectures"] == ["Qwen2VLForConditionalGeneration"]
    assert cfg["model_type"] == "qwen2_vl"
    text, vision = cfg["text_config"], cfg["vision_config"]
    assert (text["hidden_size"], text["intermediate_size"], text["num_hidden_layers"]) == (128, 256, 2)
    assert (text["num_attention_heads"], text["num_key_value_heads"], text["vocab_size"]) == (2, 1, 1024)
    head_dim = text["hidden_size"] // text["num_attention_heads"]
    assert sum(text["rope_parameters"]["mrope_section"]) == head_dim // 2
    assert (vision["depth"], vision["embed_dim"], vision["num_heads"]) == (2, 128, 2)
    assert (vision["patch_size"], vision["spatial_merge_size"]) == (14, 2)
    assert vision["hidden_size"] == text["hidden_size"]

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    ids = tok.convert_tokens_to_ids
    assert len(tok) == 1024
    assert cfg["image_token_id"] == ids("<|image_pad|>")
    assert cfg["video_token_id"] == ids("<|video_pad|>")
    assert cfg["vision_start_token_id"] == ids("<|vision_start|>")
    assert cfg["vision_end_token_id"] == ids("<|vision_end|>")
    assert tok.eos_token == "<|im_end|>"
    assert ids("<|im_end|>") in _json(model_dir, "generation_config.json")["eos_token_id"]
    text_in = "def f(x):\n    return x + 1  # ünïcode"
    assert tok.decode(tok(text_in)["input_ids"]) == text_in  # byte-level BPE round-trips

    pre = _json(model_dir, "preprocessor_config.json")
    assert (pre["min_pixels"], pre["max_pixels"]) == (56 * 56, 448 * 448)

    # transformers itself accepts the config
    loaded = transformers.AutoConfig.from_pretrained(model_dir)
    assert loaded.text_config.hidden_size == 128 and loaded.vision_config.depth == 2


def test_chat_template_and_image_tokens(model_dir):
    proc = transformers.AutoProcessor.from_pretrained(model_dir)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click OK."}]},
        {"role": "assistant", "content": "Thought: ok\nAction: click(start_box='(1,2)')"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Again."}]},
    ]
    prompt = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Click OK.<|im_end|>\n"
        "<|im_start|>assistant\nThought: ok\nAction: click(start_box='(1,2)')<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Again.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # One image token per 28x28 pixels after resizing into [56x56, 448x448]:
    # 160x210 -> 168x224 -> 6*8 = 48; a 1920x1080 screen is capped at <= 256.
    small, big = Image.new("RGB", (160, 210)), Image.new("RGB", (1920, 1080))
    out = proc(text=[prompt], images=[small, big], return_tensors="np")
    n_small, n_big = (int(t.prod()) // 4 for t in out["image_grid_thw"])
    assert n_small == 48 and 200 <= n_big <= 256
    image_id = proc.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert (out["input_ids"][0] == image_id).sum() == n_small + n_big
