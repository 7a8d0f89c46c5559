"""Checkpoint loading errors, model specs, chat templates and the tokenizers."""

from __future__ import annotations

import json

import pytest

from glmcot.engine.models.config import ModelConfig
from glmcot.engine.models.loader import load_model
from glmcot.engine.models.random_models import parse_spec
from glmcot.engine.models.tokenizer import qwen_tokenizer


def test_bad_specs_and_directories_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="bad model spec"):
        parse_spec("random:qwen3:huge")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model(str(tmp_path), "float32", "cpu", 64)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    with pytest.raises(FileNotFoundError, match="safetensors"):
        load_model(str(tmp_path), "float32", "cpu", 64)
    with pytest.raises(ValueError, match="unsupported model_type 'gpt2'"):
        ModelConfig.from_hf({"model_type": "gpt2"})


def test_checkpoint_missing_a_tensor_or_too_small_vocab(references, tmp_path):
    import shutil

    from safetensors.torch import load_file, save_file

    ref = references("qwen2-tied")
    broken = tmp_path / "broken"
    shutil.copytree(ref.directory, broken)
    (weights,) = broken.glob("*.safetensors")
    tensors = load_file(str(weights))
    tensors.pop("model.layers.1.mlp.up_proj.weight")
    save_file(tensors, str(weights))
    with pytest.raises(ValueError, match="missing tensors: layers.1.mlp.gate_up_proj.weight"):
        load_model(str(broken), "float32", "cpu", 64)
    config = json.loads((broken / "config.json").read_text())
    config["vocab_size"] = 100
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="tokenizer has"):
        load_model(str(broken), "float32", "cpu", 64)


def test_rope_and_bias_fields_are_read_from_config():
    cfg = ModelConfig.from_hf({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
                               "num_hidden_layers": 1, "num_attention_heads": 2, "attention_bias": True,
                               "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8.0,
                                                   "original_max_position_embeddings": 64}})
    assert cfg.rope_theta == 5e5 and cfg.rope_scaling["rope_type"] == "llama3"
    assert cfg.num_kv_heads == 2 and cfg.head_dim == 4 and cfg.qkv_bias and cfg.o_bias and not cfg.qk_norm
    old = ModelConfig.from_hf({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
                               "num_hidden_layers": 1, "num_attention_heads": 2, "rope_theta": 1e6, "eos_token_id": [3, 4]})
    assert old.rope_theta == 1e6 and old.rope_scaling is None and old.qkv_bias and not old.o_bias
    assert old.eos_token_ids == (3, 4)


def test_chat_template_and_qwen_tokenizer(tokenizer):
    text = tokenizer.apply_chat_template([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer.encode(text)
    assert tokenizer.token_to_id("<|im_start|>") in ids and tokenizer.decode(ids) == "system\nS\nuser\nU\nassistant\n"
    qwen = qwen_tokenizer()
    ids = qwen.encode("Hello 北京<|im_end|>")
    assert ids[-1] == 151645 and qwen.decode(ids) == "Hello 北京" and 151643 in qwen.eos_token_ids
    assert qwen.decode([200000, 9707]) == qwen.decode([9707])  # ids past the tokenizer decode to nothing


def test_keep_large_buffers_reports_what_it_did():
    import platform
    import sys

    from glmcot.engine.allocator import keep_large_buffers

    # With glibc on Linux both thresholds are accepted; elsewhere nothing is changed.
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert keep_large_buffers() is glibc


def test_engines_sharing_one_set_of_weights_give_the_same_outputs():
    """load_for + LLMEngine(loaded=): two engines over one model (each with its own pool and
    cache) answer exactly as an engine that loaded its own; a mismatched engine is refused."""
    from glmcot.engine import EngineConfig, SamplingParams
    from glmcot.engine.core.llm_engine import LLMEngine, load_for

    config = EngineConfig(model="random:qwen3:tiny", num_threads=2, kv_cache_tokens=1024)
    prompts = ["The graph has a node", "Papers cite other papers and"]

    def run(engine):
        requests = [engine.add_request(p, SamplingParams(max_tokens=6, ignore_eos=True)) for p in prompts]
        while engine.has_unfinished():
            engine.step()
        return [r.output_token_ids for r in requests]

    alone = run(LLMEngine(config))
    loaded = load_for(config)
    first, second = LLMEngine(config, loaded=loaded), LLMEngine(config, loaded=loaded)
    assert first.model is second.model and first.runner.kv_cache.data_ptr() != second.runner.kv_cache.data_ptr()
    assert run(first) == alone and run(second) == alone
    with pytest.raises(ValueError, match="shared model is torch.float32"):
        LLMEngine(EngineConfig(model="random:qwen3:tiny", dtype="bfloat16", num_threads=2), loaded=loaded)


def test_tiny_qwen_vocab_counts_real_qwen_tokens():
    """The cache-study shape: tiny compute, Qwen's BPE, positions long enough for recorded prompts."""
    text = "Node DOID:0009 (disease): inflammation of the joints; neighbours: 5 genes, 3 compounds."
    small, qwen_vocab = (load_model(f"random:qwen3:{size}", "float32", "cpu", 1 << 16) for size in ("tiny", "tiny-qwen-vocab"))
    assert qwen_vocab.tokenizer.encode(text) == qwen_tokenizer().encode(text)
    assert len(small.tokenizer.encode(text)) > len(qwen_vocab.tokenizer.encode(text))
    assert qwen_vocab.config.hidden_size == small.config.hidden_size == 128
    assert qwen_vocab.config.vocab_size == 151936
    assert qwen_vocab.config.max_position_embeddings >= 32768 > small.config.max_position_embeddings
