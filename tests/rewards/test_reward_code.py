import pytest

from benchmax.envs import RolloutFailure
from benchmax.rewards import CodeTest, code_pass_rate, code_rewards, outputs_match, run_code_tests

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
TESTS = [
    CodeTest(stdin="1 2\n", expected_stdout="3\n", name="small"),
    CodeTest(stdin="10 -4\n", expected_stdout="6", name="negative"),
    CodeTest(check="assert 1 + 1 == 2", stdin="0 0\n", name="assert"),
]


async def test_a_correct_program_passes_every_test():
    assert await code_pass_rate(ADD, TESTS) == 1.0


async def test_the_reward_is_the_fraction_of_tests_passed():
    wrong = "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)\n"
    results = await run_code_tests(wrong, TESTS)
    assert [r.reason for r in results] == ["passed", "wrong_output", "passed"]
    assert await code_pass_rate(wrong, TESTS) == pytest.approx(2 / 3)


async def test_failing_checks_errors_and_timeouts_are_failures_with_reasons():
    program = "def square(x):\n    return x * x\n"
    tests = [
        CodeTest(check="assert square(3) == 9"),
        CodeTest(check="assert square(3) == 10"),
        CodeTest(check="while True: pass"),
        CodeTest(check="x = bytearray(1 << 30)"),
    ]
    results = await run_code_tests(program, tests, timeout=1.0, memory_mb=128)
    assert [r.reason for r in results] == ["passed", "error", "timeout", "memory"]
    assert "AssertionError" in results[1].run.stderr


async def test_code_rewards_reads_the_last_code_block():
    completion = f"Here you go:\n```python\n{ADD}```"
    assert await code_rewards(completion, TESTS) == {"tests_passed": 1.0, "tests_all": 1.0}
    assert await code_rewards("I cannot do that", TESTS) == {"tests_passed": 0.0, "tests_all": 0.0}


async def test_a_sandbox_that_cannot_start_is_a_rollout_failure_not_a_zero(tmp_path):
    with pytest.raises(RolloutFailure) as caught:
        await run_code_tests(ADD, TESTS[:1], python=str(tmp_path / "no-such-python"))
    assert caught.value.reason == "sandbox_error"
    assert "no-such-python" in caught.value.message


async def test_a_bad_file_name_is_the_env_authors_error():
    with pytest.raises(ValueError, match="relative path inside the temp dir"):
        await run_code_tests(ADD, TESTS[:1], files={"../outside.txt": "x"})


def test_outputs_match_modes():
    assert outputs_match("1 2\n3  \n\n", "1 2\n3", "lines")
    assert not outputs_match("1  2\n3", "1 2\n3", "lines")
    assert outputs_match("1  2\n3", "1 2 3", "tokens")
    assert not outputs_match("3\n", "3", "exact")
    with pytest.raises(ValueError, match="unknown compare mode"):
        outputs_match("a", "a", "fuzzy")  # type: ignore[arg-type]


def test_a_test_needs_something_to_check():
    with pytest.raises(ValueError, match="needs expected_stdout or check"):
        CodeTest(stdin="1")
