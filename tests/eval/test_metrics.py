import pytest

from glmcot.eval.metrics import (as_text, exact_match, mean_rouge_l, normalize_answer, parse_judge_reply,
                                 render_judge, rouge_l)


def test_normalize_follows_graphcot_in_loop_check():
    assert normalize_answer("The Price is 12.99 USD!") == "price is 1299"
    assert normalize_answer("  A  cat,   an apple ") == "cat apple"
    # 'the' inside a word survives; only whole words go
    assert normalize_answer("Theory") == "theory"


def test_exact_match_is_normalised_and_handles_none_and_lists():
    assert exact_match("the Nature Journal.", "Nature journal")
    assert not exact_match("Nature", "Science")
    assert exact_match(None, "")
    assert exact_match(["Ann", "Bob"], "ann, bob")
    assert as_text(None) == ""


def test_rouge_l_matches_rouge_score_defaults():
    assert rouge_l("Ann Lee, Bob Ray", "Ann Lee, Bob Ray") == pytest.approx(1.0)
    # LCS "ann bob" (2 of 3 tokens each side): P = R = 2/3
    assert rouge_l("ann x bob", "ann bob y") == pytest.approx(2 / 3)
    # no stemmer: "cats" and "cat" do not match
    assert rouge_l("cats", "cat") == 0.0
    assert rouge_l("", "something") == 0.0
    assert mean_rouge_l(["a b", "zzz"], ["a b", "yyy"]) == pytest.approx(0.5)


@pytest.mark.parametrize("reply,verdict", [
    ("Yes", True), ("yes.", True), (" YES, it is", True), ("No", False), ("no!", False),
    ("Maybe", None), ("", None), ("I think yes", None),
])
def test_judge_reply_parsing_never_hangs(reply, verdict):
    assert parse_judge_reply(reply) is verdict


def test_judge_prompt_comes_from_package_data():
    system, user = render_judge("Who wrote X?", "Ann", "Ann, Bob")
    assert "Yes or No" in user
    assert "Who wrote X?" in user and "Model answer: Ann" in user and "Reference answer: Ann, Bob" in user
    assert "{question}" not in user and system
    _, empty = render_judge("Q?", None, "A")
    assert "(empty)" in empty


# ---- the original's scoring (Graph-CoT eval.py), against a straight re-implementation -----------------
def original_gpt4score(replies):
    """eval.py's rule: 1 for a reply of exactly "Yes", else 0; every reply in the denominator."""
    return sum(1 if reply == "Yes" else 0 for reply in replies) / len(replies)


def test_exact_em_is_string_equality_beside_the_normalised_one():
    from glmcot.eval.metrics import exact_match_strict

    assert exact_match_strict("Ada Park", "Ada Park") and not exact_match_strict("ada park", "Ada Park")
    assert exact_match("ada park.", "Ada Park") and not exact_match_strict("ada park.", "Ada Park")
    assert exact_match_strict(None, "") and exact_match_strict(1951, "1951")


def test_bootstrap_median_matches_rouge_score_aggregation_closely():
    import numpy as np
    from rouge_score import scoring

    from glmcot.eval.metrics import bootstrap_median

    generator = np.random.default_rng(3)
    values = generator.random(200).tolist()
    aggregator = scoring.BootstrapAggregator(n_samples=1000)
    for value in values:
        aggregator.add_scores({"rougeL": scoring.Score(value, value, value)})
    reference = aggregator.aggregate()["rougeL"].mid.fmeasure
    ours = bootstrap_median(values)
    assert abs(ours - reference) < 0.01 and abs(ours - float(np.mean(values))) < 0.01
    assert bootstrap_median(values, seed=1) == bootstrap_median(values, seed=1)
    assert bootstrap_median([]) == 0.0


@pytest.mark.parametrize("replies", [["Yes", "No", "yes", "Yes.", "Maybe", ""], ["Yes"] * 3, ["No", " Yes "]])
def test_original_judge_rule_keeps_every_reply_in_the_denominator(replies):
    from glmcot.eval.metrics import judge
    from glmcot.llm import LLMBackend, LLMResponse

    class Replies(LLMBackend):
        label = "canned judge"

        def __init__(self):
            self.left, self.requests = list(replies), []

        def complete(self, request):
            self.requests.append(request)
            return LLMResponse(self.left.pop(0), 5, 0, 1, 0.0)

    backend = Replies()
    verdicts = [judge(backend, "Q?", "Ann", "Ann", rule="original")[0] for _ in replies]
    assert None not in verdicts
    # surrounding whitespace aside (a completions reply may carry it), exactly eval.py's rule
    assert sum(verdicts) / len(verdicts) == original_gpt4score([reply.strip() for reply in replies])
    prompt = backend.requests[0].prompt
    assert prompt == ("You are a generative language model evaluator.\n\nQuestion:Q? \nModel prediction: Ann \n"
                      "Ground truth: Ann. \nPlease help me judge if the model prediction is correct or not given the "
                      "question and ground truth answer. Please use one word (Yes or No) to answer. Do not explain.")


def test_lenient_judge_is_an_option_and_leaves_unreadable_replies_out():
    from glmcot.eval.metrics import judge
    from glmcot.llm import LLMBackend, LLMResponse

    class Reply(LLMBackend):
        label = "canned judge"

        def complete(self, request):
            return LLMResponse("Maybe so", 5, 0, 1, 0.0)

    assert judge(Reply(), "Q?", "a", "a", rule="lenient")[0] is None
    assert judge(Reply(), "Q?", "a", "a", rule="original")[0] is False
    with pytest.raises(ValueError, match="unknown judge rule"):
        judge(Reply(), "Q?", "a", "a", rule="kind")
