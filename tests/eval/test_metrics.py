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
