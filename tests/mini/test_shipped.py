"""The glmcot-mini checkpoint shipped inside the package: it says how it was made, `glmcot-mini`
resolves to it on a machine that never trained, the native engine and transformers give it the
same greedy tokens, and it still scores its recorded exact matches on its held-out sample."""

import json

import pytest

from glmcot.mini import MODEL_NAME
from glmcot.mini.checkpoint import resolve, shipped_path
from glmcot.benchmarks.mini_sample import SAMPLE_FILE, score_sample

SHIPPED = shipped_path()


def test_the_shipped_checkpoint_records_how_it_was_made(tmp_path, monkeypatch):
    record = json.loads((SHIPPED / "training.json").read_text())
    assert record["model"] == MODEL_NAME and record["command"].startswith("glmcot train-mini --preset cpu")
    assert len(record["code_version"]) == 40 and record["seed"] == 0
    assert record["data"]["train_examples"] > 0 and record["data"]["eval_seeds"] == [1001]
    assert set(record["data"]["train_seeds"]).isdisjoint(record["data"]["eval_seeds"])
    assert record["steps"] > 0 and record["parameters"] > 0
    assert (SHIPPED / "model.safetensors").stat().st_size < 16_000_000
    monkeypatch.setenv("GLMCOT_CACHE_DIR", str(tmp_path / "fresh"))  # nothing trained on this machine
    assert resolve(MODEL_NAME) == SHIPPED


def test_native_engine_and_transformers_agree_on_the_shipped_file():
    import torch
    from transformers import AutoModelForCausalLM

    from glmcot.engine import LLM, SamplingParams

    llm = LLM(model=str(SHIPPED))
    model = AutoModelForCausalLM.from_pretrained(str(SHIPPED)).eval()
    for prompt in ('<<glmcot-mini act>>\nNeeded: Who are the authors of "Sparse Attention for Long Graphs"?\n',
                   "<<glmcot-mini classify>>\nQuestion: How many papers did Ada Park write?\n"):
        ids = llm.tokenizer.encode(prompt)
        engine = llm.generate([ids], SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))[0].token_ids
        with torch.no_grad():
            reference = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       max_new_tokens=24, min_new_tokens=24, do_sample=False, eos_token_id=None,
                                       pad_token_id=0)[0, len(ids):].tolist()
        assert list(engine) == reference, prompt


@pytest.mark.slow
def test_the_shipped_checkpoint_still_scores_its_recorded_sample(tmp_path):
    recorded = json.loads((SHIPPED / SAMPLE_FILE).read_text())["scores"]
    for expected in recorded:
        score = score_sample(SHIPPED, tmp_path, domain=expected["domain"], seed=expected["seed"],
                             per_template=expected["questions_per_template"], constrained=expected["constrained"])
        assert score.qids == expected["qids"]
        assert score.exact == expected["exact"] and score.answers == expected["answers"]
