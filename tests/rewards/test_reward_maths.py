import logging
import threading
import time

import pytest

from benchmax.rewards import MathVerifier, MathVerifyUnavailable, math_equal, math_equal_sync, math_reward


@pytest.fixture(scope="module")
def verifier():
    verifier = MathVerifier(workers=1)
    yield verifier
    verifier.close()


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("0.5", r"\frac{1}{2}"),
        (r"\frac{2}{4}", "1/2"),
        (r"\{2, 1\}", r"\{1,2\}"),
        ("(0,1]", "(0, 1]"),
        ("2x+1", "1+2x"),
        ("1,000", "1000"),
        (r"The answer is $\boxed{3}$.", "3"),
    ],
)
def test_equivalent_answers_are_equal(verifier, answer, gold):
    assert verifier.equal(answer, gold)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [("41", "42"), ("[1,2)", "(1,2)"), ("2x+1", "2"), (r"\{1,3\}", r"\{1,2\}")],
)
def test_different_answers_are_not_equal(verifier, answer, gold):
    assert not verifier.equal(answer, gold)


def test_any_of_several_golds_counts(verifier):
    assert verifier.equal("0.25", ["1/3", r"\frac14"])


def test_a_pathological_expression_times_out_as_not_equal_and_the_worker_is_replaced(verifier, caplog):
    before = verifier.timeouts
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="benchmax.rewards.math"):
        assert not verifier.equal(r"$9^{9^{9^{9}}}$", "1", timeout=0.3)
    assert time.monotonic() - started < 5
    assert verifier.timeouts == before + 1
    assert "no answer within 0.3s" in caplog.text
    assert verifier.equal("0.5", "1/2")


def test_verification_works_from_worker_threads(verifier):
    # math-verify's own signal-based timeout raises ValueError outside the main thread.
    results = []
    thread = threading.Thread(target=lambda: results.append(verifier.equal(r"\frac{3}{6}", "0.5")))
    thread.start()
    thread.join(60)
    assert results == [True]


async def test_math_equal_and_math_reward_run_off_the_event_loop(loop_ticks):
    async with loop_ticks(0.01) as ticks:
        assert await math_equal(r"\frac{1}{4}", "0.25")
        assert await math_reward(r"so <answer>\frac{6}{8}</answer>", "0.75") == 1.0
        assert await math_reward(r"\boxed{5}", "6") == 0.0
        assert await math_reward("   ", "6") == 0.0
    assert ticks.count > 0
    assert math_equal_sync("3", "3.0")


def test_a_missing_interpreter_is_reported_clearly():
    verifier = MathVerifier(python="/bin/false")
    with pytest.raises(MathVerifyUnavailable, match="benchmax\\[rewards\\]"):
        verifier.equal("1", "2")
    verifier.close()
