"""Constrained decoding on a tiny trained checkpoint: the agents' grammars accept the gold replies
and reject misnamed relations, the native engine's greedy output under a grammar always parses,
RetrieveNode's text can be held to spans of the question, and the faithful Graph-CoT is never
constrained."""

import re

import pytest

from glmcot.agents.grammar import (CLASSIFY_EBNF, CLASSIFY_PLAN_EBNF, REASON_EBNF, FAITHFUL_METHOD, GrammarBackend,
                                   GrammarSettings, GraphVocabulary, act_grammar, graphcot_action_grammar,
                                   prompt_ids, question_spans, request_grammar)
from glmcot.contract import Level, Segment
from glmcot.llm.types import Grammar, LLMBackend, LLMRequest, LLMResponse
from glmcot.mini.data import read_examples


@pytest.fixture(scope="module")
def parts(built):
    from glmcot.engine.grammar import GrammarCompiler
    from glmcot.engine.models.tokenizer import load_tokenizer
    from glmcot.graph.storage.store import Graph

    root, _ = built
    tokenizer = load_tokenizer(root / "ckpt")
    compiler = GrammarCompiler(tokenizer, tokenizer.vocab_size, (tokenizer.token_to_id("<|endoftext|>"),))
    vocabulary = GraphVocabulary.of(Graph.open(root / "work" / "graphs" / "dblp-1001" / "graph"))
    return root, compiler, vocabulary


def accepts(compiler, grammar: Grammar, text: str) -> bool:
    return bool(compiler.state(grammar).matcher.accept_string(text))


def test_every_gold_reply_is_inside_its_agents_grammar(parts):
    root, compiler, vocabulary = parts
    held = read_examples(root / "work" / "eval.jsonl")
    checked = {"classify": 0, "reason": 0, "act": 0}
    for example in held:
        if example.agent == "act":
            grammar = act_grammar(vocabulary, prompt_ids(example.prompt))
        elif example.agent == "classify":
            grammar = Grammar(CLASSIFY_PLAN_EBNF)
        else:
            grammar = Grammar(REASON_EBNF)
        assert accepts(compiler, grammar, example.reply), (example.agent, example.reply)
        checked[example.agent] += 1
    assert min(checked.values()) > 0
    assert "author" in vocabulary.relations and "title" in vocabulary.features


def test_misnamed_relations_features_and_outside_python_are_rejected(parts):
    _, compiler, vocabulary = parts
    grammar = act_grammar(vocabulary)
    good = '<code>\nnode = RetrieveNode("Deep Nets")\nprint(", ".join(NodeFeature(n, "name") for n in NeighbourCheck(node, "author")))\n</code>'
    assert accepts(compiler, grammar, good)
    for bad in (good.replace('"author"', '"authors"'),          # not a relation of this graph
                good.replace('"name"', '"full_name"'),            # not a feature
                good.replace("node = ", "import os\nnode = "),     # outside the sandbox's subset
                good.replace(".join(", ".format(")):               # a method the sandbox forbids
        assert not accepts(compiler, grammar, bad), bad
    assert accepts(compiler, Grammar(CLASSIFY_EBNF), "<label>non-deterministic</label>")
    assert not accepts(compiler, Grammar(CLASSIFY_EBNF), "<label>maybe</label>")
    assert not accepts(compiler, Grammar(REASON_EBNF), "The answer is 4")


def test_question_spans_cover_quoted_titles_and_word_runs():
    spans = question_spans('Who wrote "Deep Nets for Graphs" with Ada Park?', max_words=4)
    assert "Deep Nets for Graphs" in spans and "Ada Park" in spans and "Ada" in spans
    assert all(len(span.split()) <= 4 for span in spans if span != "Deep Nets for Graphs")
    assert prompt_ids("author (2): A <0123456789abcdef01234567> | [node pub_3 | venue]") == ("0123456789abcdef01234567", "pub_3")


def test_engine_greedy_output_under_each_grammar_parses(parts):
    from glmcot.agents.formats import parse_label, parse_reasoning
    from glmcot.agents.sandbox.policy import check_snippet
    from glmcot.engine import LLM, SamplingParams

    root, _, vocabulary = parts
    llm = LLM(model=str(root / "ckpt"), device="cpu", dtype="float32")
    question = 'Who are the authors of "Zorbly Quanta Mesh"?'
    prompts = {"classify": f"<<glmcot-mini classify>>\nQuestion: {question}\n",
               "reason": "<<glmcot-mini reason>>\nNotebook:\n",
               "act": f"<<glmcot-mini act>>\nNeeded: {question}\n"}
    grammars = {"classify": Grammar(CLASSIFY_EBNF), "reason": Grammar(REASON_EBNF),
                "act": act_grammar(vocabulary, spans=question_spans(question))}
    for agent, prompt in prompts.items():
        out = llm.generate([prompt], SamplingParams(max_tokens=200, grammar=grammars[agent]))[0]
        text = out.text
        if agent == "classify":
            assert text in ("<label>deterministic</label>", "<label>non-deterministic</label>") and parse_label(text) in (True, False)
        elif agent == "reason":
            if out.finish_reason == "stop":
                assert re.fullmatch(r"<(answer|missing)>.*</\1>", text, re.S), text
                parse_reasoning(text)
        elif out.finish_reason == "stop":
            body = re.fullmatch(r"<code>\n(.*)\n</code>", text, re.S)
            assert body, text
            check_snippet(body.group(1))  # inside the sandbox's subset
            for argument in re.findall(r'RetrieveNode\("([^"]*)"\)', text):
                assert argument in question
            for name in re.findall(r'(?:NeighbourCheck|NodeDegree)\([^,]+,\s*"([^"]+)"\)', text):
                assert name in vocabulary.relations
    stats = llm.engine.stats()
    assert stats["grammar_masked_steps"] > 0 and stats["grammars_compiled"] == 3 and stats["grammar_mask_s"] > 0


class _Recorder(LLMBackend):
    label = "recorder"

    def __init__(self):
        self.requests = []

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse("", 1, 0, 1, 0.0)


def test_grammar_backend_constrains_each_agent_but_never_the_faithful_graphcot():
    vocabulary = GraphVocabulary(("author", "paper"), ("name", "title"))
    inner = _Recorder()
    backend = GrammarBackend(inner, vocabulary, GrammarSettings(question_spans=True))

    def call(agent, method="glm", text="Needed: who wrote \"Deep Nets\"?\n", stop=()):
        backend.complete(LLMRequest([Segment("shared", Level.SHARED_PROMPT), Segment(text, Level.TRANSIENT)],
                                    stop=list(stop), metadata={"agent": agent, "method": method}))
        return inner.requests[-1].grammar

    assert call("classify").ebnf == CLASSIFY_EBNF and call("classify", stop=["</missing>"]).ebnf == CLASSIFY_PLAN_EBNF
    assert call("reason").ebnf == REASON_EBNF
    act = call("act")
    assert act.choices is not None and "Deep Nets" in act.choices.choices and '"paper"' in act.ebnf
    assert call("graphcot-action", method="graphcot-repaired").name == "graphcot-action"
    assert call("graphcot-action", method=FAITHFUL_METHOD) is None
    assert call("graphcot-thought") is None
    assert request_grammar(LLMRequest([], forced_text="x", metadata={"agent": "act"}), vocabulary, GrammarSettings()) is not None
    backend.complete(LLMRequest([], forced_text="<code>\n</code>", metadata={"agent": "act"}))
    assert inner.requests[-1].grammar is None  # forced (scripted) replies are never constrained


def test_graphcot_action_grammar_holds_ids_and_schema_names(parts):
    _, compiler, vocabulary = parts
    grammar = graphcot_action_grammar(vocabulary, ("0123456789abcdef01234567",))
    assert accepts(compiler, grammar, "NeighbourCheck[0123456789abcdef01234567, author]")
    assert accepts(compiler, grammar, "RetrieveNode[Deep Nets]") and accepts(compiler, grammar, "Finish[Ada Park]")
    assert not accepts(compiler, grammar, "NeighbourCheck[0123456789abcdef01234567, authors]")
    assert not accepts(compiler, grammar, "NeighbourCheck[ffff, author]")  # an id the scratchpad never showed


def test_ask_constrained_keeps_every_reply_in_its_agents_form(built):
    import json

    from typer.testing import CliRunner

    from glmcot.cli import app

    root, _ = built
    graph = root / "work" / "graphs" / "dblp-1001" / "graph"
    question = 'Who are the authors of "Graph Learning"?'
    result = CliRunner().invoke(app, ["ask", question, "--graph", str(graph), "--model", str(root / "ckpt"), "--max-steps", "2",
                                      "--constrained", "--question-spans", "--json", "--trace"])
    from glmcot.eval.ask import ask_exit_code

    data = json.loads(result.stdout[result.stdout.index("{"):])
    assert result.exit_code == ask_exit_code(data), result.output  # 0 answered, 1 backend error, 3 no answer
    events = data["trace"]
    assert next(e for e in events if e["type"] == "classify")["parsed"] is True  # the label is always readable
    replies = [e for e in events if e["type"] == "llm"]
    assert replies and all(e["metadata"]["method"] == "glm" for e in replies)  # what GrammarBackend reads
    for event in replies:
        for argument in re.findall(r'RetrieveNode\("([^"]*)"\)', event["response"]["text"]):
            assert argument in question
    bad = CliRunner().invoke(app, ["ask", question, "--graph", str(graph), "--model", str(root / "ckpt"), "--question-spans"])
    assert bad.exit_code == 2 and "--constrained" in bad.output


def test_grammar_benchmark_compares_free_and_constrained_decoding_in_one_run(built, tmp_path):
    import json

    from glmcot.benchmarks.grammar import main

    root, _ = built
    out = tmp_path / "grammar.json"
    main(["--model", str(root / "ckpt"), "--graph", str(root / "work" / "graphs" / "dblp-1001"), "--questions", "1",
          "--rounds", "1", "--max-tokens", "16", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == {"free", "grammar", "grammar+spans"}
    assert rows["free"]["grammars_compiled"] == 0 and rows["free"]["mask_ms_per_token"] == 0.0
    assert rows["grammar"]["grammars_compiled"] == 2 and rows["grammar"]["mask_ms_per_token"] > 0
    assert rows["grammar+spans"]["grammars_compiled"] == 1  # the act grammar with spans; classify's is cached
    assert all(row["tokens"] > 0 for row in rows.values())


def test_mini_benchmark_runs_each_decoding_variant_on_the_same_questions(built, tmp_path):
    import json

    from glmcot.benchmarks.mini import main

    root, _ = built
    out = tmp_path / "bench.json"
    main(["--model", str(root / "ckpt"), "--domains", "dblp", "--limit", "1", "--max-tokens", "24", "--max-rounds", "1",
          "--methods", "glm", "--grbench-per-template", "0", "--no-ceiling", "--decoding", "free,spans",
          "--data-dir", str(root / "work" / "graphs"), "--out", str(out)])
    variants = json.loads(out.read_text())["variants"]
    assert set(variants) == {"free", "spans"}
    free, spans = variants["free"], variants["spans"]
    assert free["held_out"]["dblp"]["questions"] == spans["held_out"]["dblp"]["questions"] == 1
    assert free["decode_cost"]["grammar_masked_steps"] == 0 < spans["decode_cost"]["grammar_masked_steps"]
