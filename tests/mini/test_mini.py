"""glmcot-mini: examples from the scripted policy, a training run whose loss falls, a standard
checkpoint (native engine == transformers, greedy), and the GLM loop on real decoding."""

import json
import re

import pytest

from glmcot.mini.data import DataConfig, Example, broken_snippet, read_examples, split_seeds, write_examples


def test_examples_cover_the_agents_and_the_repair_turn(built):
    root, record = built
    train = read_examples(root / "work" / "train.jsonl")
    held = read_examples(root / "work" / "eval.jsonl")
    assert {e.agent for e in train} == {"classify", "reason", "act", "graphcot-thought", "graphcot-action"}
    assert {e.agent for e in held} == {"classify", "reason", "act"}  # Graph-CoT calls: training seeds only
    assert record["data"]["train_graphcot_examples"] == sum(e.agent.startswith("graphcot") for e in train) > 0
    assert record["data"]["train_copy_drills"] == sum(e.qid.endswith("~copy") for e in train) > 0
    assert {e.seed for e in train} == {1} and {e.seed for e in held} == {1001}
    assert record["data"]["train_seeds"] == [1] and record["data"]["eval_seeds"] == [1001]
    # Shared prompts are compacted to a tag; the question is still there.
    assert all(e.segments[0].startswith("<<glmcot-mini ") for e in train)
    classify = next(e for e in train if e.agent == "classify")
    assert "Question: " in classify.prompt and classify.reply.startswith("<label>")
    action = next(e for e in train if e.agent == "graphcot-action")
    assert action.prompt.startswith("<<glmcot-mini graphcot-action>>") and "Action 1:" in action.prompt
    acts = [e for e in train if e.agent == "act"]
    assert all(e.reply.startswith("<code>") and e.reply.endswith("</code>") for e in acts)
    repairs = [e for e in train if e.repair]
    assert repairs and record["data"]["train_repair_examples"] == len(repairs)
    # The repair prompt holds the broken snippet and its error; the target is the gold snippet.
    assert all("failed" in e.prompt or "printed nothing" in e.prompt for e in repairs)
    assert all(e.reply.startswith("<code>") for e in repairs)
    assert not any(e.repair for e in held), "no faults are injected into held-out graphs"


def test_training_questions_never_use_a_held_out_wording(built):
    """Every template's last wording is held out: training graphs never phrase a question with it,
    evaluation graphs do."""
    from glmcot.benchmarks.mini import phrasing

    root, _ = built
    def records(folder):
        return [json.loads(line) for line in (root / "work" / "graphs" / folder / "questions.jsonl").read_text().splitlines()]
    train, held = records("dblp-1"), records("dblp-1001")
    assert {phrasing(r, "dblp") for r in train} == {"seen"}
    assert json.loads((root / "work" / "graphs" / "dblp-1" / "meta.json").read_text())["wordings"] == "seen"
    assert "held-out" in {phrasing(r, "dblp") for r in held}
    questions = {e.prompt for e in read_examples(root / "work" / "train.jsonl")}
    assert not any(r["question"] in prompt for r in held if phrasing(r, "dblp") == "held-out" for prompt in questions)


def test_examples_round_trip_and_seeds_must_be_disjoint(tmp_path):
    example = Example("dblp", 3, "q1", "dblp/0", "act", 0, 0, ["<<glmcot-mini act>>\n", "Needed: x\n"], "<code>\nprint(1)\n</code>")
    assert write_examples([example], tmp_path / "e.jsonl") == 1
    assert read_examples(tmp_path / "e.jsonl") == [example]
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_examples(tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="held out"):
        split_seeds(DataConfig(train_seeds=(1, 2), eval_seeds=(2,)))


def test_copy_drills_replace_the_copied_argument_in_prompt_and_reply_alike():
    from glmcot.mini.data import copy_drills

    act = Example("dblp", 1, "q1", "dblp/0", "act", 0, 0, ["<<glmcot-mini act>>\n", 'Needed: who wrote "Deep Nets"?\n'],
                  '<code>\nnode = RetrieveNode("Deep Nets")\nprint(node)\n</code>')
    action = Example("dblp", 1, "q1", "dblp/0", "graphcot-action", 0, 0, ["<<glmcot-mini graphcot-action>>\n",
                     'Question: who wrote "Deep Nets"?\nAction 1:'], "RetrieveNode[Deep Nets]")
    classify = Example("dblp", 1, "q2", "dblp/1", "classify", 0, 0, ["<<glmcot-mini classify>>\n",
                       "Question: Where does Ada Lovelace work on Graph Mining?\n"], "<label>deterministic</label>")
    invented = Example("dblp", 1, "q3", "dblp/0", "act", 0, 0, ["Needed: x\n"], '<code>\nRetrieveNode("Not In Prompt")\n</code>')
    examples = [act, action, classify, invented]
    drills = copy_drills(examples, 1.0)
    assert [d.agent for d in drills] == ["act", "graphcot-action"]  # nothing to copy in the last one
    for drill in drills:
        assert "Deep Nets" not in drill.prompt + drill.reply and drill.qid == "q1~copy"
        argument = re.search(r'RetrieveNode(?:\("([^"]+)"\)|\[([^\]]+)\])', drill.reply)
        copied = argument.group(1) or argument.group(2)
        assert copied in drill.prompt and all(word.lower() in classify.prompt.lower() or word.isdigit() for word in copied.split())
    assert copy_drills(examples, 1.0) == drills and copy_drills(examples, 0.0) == []


def test_broken_snippets_differ_from_the_gold_one():
    gold = 'node = RetrieveNode("A")\nfound = NeighbourCheck(node, "author")\nprint(len(found))'
    broken = {broken_snippet(gold, kind) for kind in range(3)}
    assert gold not in broken and len(broken) == 3


def test_training_loss_falls_and_is_recorded(built):
    root, record = built
    log = json.loads((root / "ckpt" / "train_log.json").read_text())["train"]
    assert record["steps"] == 8 and log[0]["step"] == 1
    assert log[-1]["loss"] < log[0]["loss"]
    assert record["tokens_seen"] > record["reply_tokens_seen"] > 0
    saved = json.loads((root / "ckpt" / "training.json").read_text())
    assert saved["model"] == "glmcot-mini" and saved["command"] == "test" and saved["data"]["eval_seeds"] == [1001]
    assert (root / "ckpt" / "loss.png").stat().st_size > 0


def test_checkpoint_greedy_tokens_match_transformers(built):
    import torch
    from transformers import AutoModelForCausalLM

    from glmcot.engine import LLM, SamplingParams

    root, _ = built
    folder = str(root / "ckpt")
    llm = LLM(model=folder)
    prompt = "<<glmcot-mini act>>\nNeeded: the authors of \"Graph Learning\"\n"
    ids = llm.tokenizer.encode(prompt)
    engine = llm.generate([ids], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))[0].token_ids
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        reference = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), max_new_tokens=12,
                                   min_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    assert list(engine) == reference


def test_missing_checkpoint_names_the_build_command(tmp_path):
    from glmcot.mini.checkpoint import resolve

    with pytest.raises(FileNotFoundError, match="glmcot train-mini --preset cpu"):
        resolve(str(tmp_path / "nowhere"))


def test_agents_run_end_to_end_on_real_decoding(built):
    from glmcot.agents import AgentContext
    from glmcot.agents.config import AgentConfig
    from glmcot.agents.records import QuestionResult
    from glmcot.agents.runner import run_questions
    from glmcot.mini.backend import mini_backend

    root, _ = built
    graph = root / "work" / "graphs" / "dblp-1001"
    records = [json.loads(line) for line in (graph / "questions.jsonl").read_text().splitlines()][:3]
    context = AgentContext(graph, retriever="lexical", workers=1, domain="dblp")
    backend = mini_backend(str(root / "ckpt"))
    try:
        assert "glmcot-mini" in backend.label
        config = AgentConfig(domain="dblp", max_rounds=2, max_code_retries=1, act_max_tokens=48, reason_max_tokens=24,
                             classify_max_tokens=16)
        results = run_questions(records, method="glm", backend=backend, context=context, config=config, concurrency=1)
    finally:
        backend.close()
        context.close()
    assert len(results) == 3 and all(isinstance(r, QuestionResult) for r in results)
    known = {None, "", "unexpected_output", "retrieval_error", "code_error", "step_limit", "backend_error"}
    assert all(r.failure in known for r in results)
    assert all(r.llm_calls >= 2 and r.output_tokens > 0 for r in results)  # the model really decoded


def test_ask_with_glmcot_mini_and_no_checkpoint_says_how_to_build_it(tmp_path, monkeypatch, built):
    from typer.testing import CliRunner

    from glmcot.cli import app

    import glmcot.mini.checkpoint as checkpoint

    root, _ = built
    monkeypatch.setenv("GLMCOT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(checkpoint, "shipped_path", lambda: tmp_path / "not-shipped")  # an install without the shipped file
    graph = root / "work" / "graphs" / "dblp-1001" / "graph"
    result = CliRunner().invoke(app, ["ask", "Who wrote x?", "--graph", str(graph), "--model", "glmcot-mini"])
    assert result.exit_code != 0
    assert "glmcot train-mini --preset cpu" in " ".join(result.output.split())


def test_ask_runs_the_agents_on_a_glmcot_mini_checkpoint(built):
    from typer.testing import CliRunner

    from glmcot.cli import app

    root, _ = built
    graph = root / "work" / "graphs" / "dblp-1001" / "graph"
    result = CliRunner().invoke(app, ["ask", "Who are the authors of \"Graph Learning\"?", "--graph", str(graph),
                                      "--model", str(root / "ckpt"), "--max-steps", "2", "--json"])
    data = json.loads(result.stdout[result.stdout.index("{"):])
    # exit 0 with an answer; 3 (and a failure category) without one
    assert result.exit_code == (0 if data["answer"] else 3), result.output
    assert data["answer"] or data["failure"]
    assert "glmcot-mini" in result.output  # the compact-prompt backend answered, with real decoding


def test_training_is_seeded(built):
    from glmcot.engine.models.tokenizer import load_tokenizer
    from glmcot.mini.config import preset
    from glmcot.mini.train import train

    root, _ = built
    examples = read_examples(root / "work" / "train.jsonl")[:24]
    tokenizer = load_tokenizer(root / "ckpt")
    config = preset("tiny", max_steps=3, epochs=3, eval_every=0)
    first, second = (train(config, examples, [], tokenizer) for _ in range(2))
    assert [e["loss"] for e in first.log] == [e["loss"] for e in second.log] and len(first.log) == 3
    other = train(preset("tiny", max_steps=3, epochs=3, seed=1), examples, [], tokenizer)
    assert [e["loss"] for e in other.log] != [e["loss"] for e in first.log]


def test_train_mini_command_builds_a_checkpoint_with_its_record(tmp_path):
    import json

    from typer.testing import CliRunner

    from glmcot.cli import app

    result = CliRunner().invoke(app, ["train-mini", "--preset", "tiny", "--out", str(tmp_path / "ckpt"), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "ckpt" / "training.json").read_text())
    assert record["steps"] >= 1 and (tmp_path / "ckpt" / "model.safetensors").is_file()


def test_collecting_in_processes_gives_the_same_examples(built, tmp_path):
    """Graphs collected in parallel processes come back in job order: the data set does not depend
    on the process count."""
    from glmcot.mini.data import collect

    root, _ = built
    serial = read_examples(root / "work" / "train.jsonl")
    from dataclasses import replace

    from glmcot.mini.config import preset

    config = replace(preset("tiny").data, processes=2)
    parallel = collect(config, tmp_path / "graphs")
    assert parallel.train == serial
    assert parallel.eval == read_examples(root / "work" / "eval.jsonl")
