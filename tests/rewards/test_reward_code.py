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


SQUARE = "def square(x):\n    return x * x\n"
SQUARE_CHECKS = [CodeTest(check="assert square(3) == 9"), CodeTest(check="assert square(-2) == 4", stdin="5\n")]
GAMING = {
    "os_exit": "import os\nos._exit(0)\n",
    "sys_exit": "import sys\nsys.exit(0)\n",
    "excepthook_exits": "import os, sys\nsys.excepthook = lambda *a: os._exit(0)\ndef square(x):\n    return 0\n",
    "atexit_exits": "import atexit, os\natexit.register(lambda: os._exit(0))\ndef square(x):\n    return 0\n",
    "stdout_closed": "import os, sys\ndef square(x):\n    return 0\nsys.stdout.close()\nos.close(1)\n",
    "stdout_redirected": "import os\ndef square(x):\n    return 0\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n",
    "fake_nonce": "import os\nprint('\\n' + '0' * 32)\nos._exit(0)\n",
    "reads_every_file": (
        "import os, sys\n"
        "for name in os.listdir('.'):\n"
        "    if os.path.isfile(name):\n"
        "        sys.stdout.write(open(name, errors='replace').read()[-64:] + '\\n')\n"
        "sys.stdout.flush()\nos._exit(0)\n"
    ),
    "trace_skips_the_check": (
        "import os, sys\n"
        "def square(x):\n    return 0\n"
        "def trace(frame, event, arg):\n"
        "    if frame.f_code.co_filename == 'check':\n        os._exit(0)\n"
        "    return trace\n"
        "sys.settrace(trace)\n"
    ),
    "thread_exits_during_the_check": (
        "import os, threading, time\n"
        "def square(x):\n    time.sleep(2)\n    return 0\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), os._exit(0)), daemon=True).start()\n"
    ),
    "exit_patched": (
        "import os\ndef square(x):\n    return 0\n"
        "os._exit = lambda status: None\nos.write = lambda fd, data: len(data)\n"
    ),
}


@pytest.mark.parametrize("program", GAMING.values(), ids=GAMING.keys())
async def test_a_program_that_ends_the_process_itself_scores_zero(program: str) -> None:
    results = await run_code_tests(program, SQUARE_CHECKS, timeout=5.0)
    assert [result.passed for result in results] == [False, False], [(r.reason, r.run) for r in results]
    assert await code_pass_rate(program, SQUARE_CHECKS, timeout=5.0) == 0.0


@pytest.mark.parametrize(
    ("program", "rate"),
    [
        (SQUARE, 1.0),
        (SQUARE + "print('chatty', flush=False)\nimport sys\nsys.exit(0)\n", 1.0),
        (SQUARE + "import atexit\natexit.register(print, 'bye')\n", 1.0),
        ("def square(x):\n    return x + x\n", 0.0),
        ("def square(x):\n    raise SystemExit(3)\n", 0.0),
    ],
    ids=["honest", "honest_exits_0", "honest_atexit", "wrong", "wrong_exits_3"],
)
async def test_honest_programs_score_by_the_check(program: str, rate: float) -> None:
    assert await code_pass_rate(program, SQUARE_CHECKS) == rate


async def test_output_and_check_together_see_the_programs_own_stdout() -> None:
    program = "n = int(input())\nprint(n * n)\ndef square(x):\n    return x * x\n"
    test = CodeTest(stdin="7\n", expected_stdout="49\n", check="assert square(7) == 49")
    (result,) = await run_code_tests(program, [test])
    assert (result.passed, result.run.stdout) == (True, "49\n")
    (forged,) = await run_code_tests("import os\nprint(49, flush=True)\nos._exit(0)\n", [test])
    assert (forged.passed, forged.reason) == (False, "no_report")


CHECK_EXITS = {
    "raise_system_exit_0": "def square(x):\n    raise SystemExit(0)\n",
    "sys_exit": "import sys\ndef square(x):\n    sys.exit()\n",
    "builtin_exit": "def square(x):\n    exit()\n",
    "audit_hook_on_the_checks_exec": (
        "import sys\ndef square(x):\n    return 0\n"
        "def hook(event, args):\n    if event == 'exec':\n        raise SystemExit(0)\n"
        "sys.addaudithook(hook)\n"
    ),
    "nonce_from_the_callers_frames": (
        "import os, re, sys\n"
        "def square(x):\n"
        "    frame, found = sys._getframe(1), set()\n"
        "    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):\n"
        "            text = value.decode('latin-1') if isinstance(value, bytes) else value\n"
        "            if isinstance(text, str) and re.fullmatch(r'[0-9a-f]{32}', text):\n"
        "                found.add(text)\n"
        "        frame = frame.f_back\n"
        "    sys.stdout.write(''.join('\\n' + nonce + '\\n' for nonce in found))\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n"
    ),
    "nonce_from_the_parents_memory": (
        "import os, re, sys\n"
        "def square(x):\n"
        "    found = set()\n"
        "    for pid in {os.getppid(), 1}:\n"
        "        try:\n"
        "            maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
        "            with open(f'/proc/{pid}/mem', 'rb') as memory:\n"
        "                for line in maps:\n"
        "                    low, high = (int(part, 16) for part in line.split()[0].split('-'))\n"
        "                    try:\n"
        "                        memory.seek(low)\n"
        "                        chunk = memory.read(high - low)\n"
        "                        found.update(re.findall(rb'(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])', chunk))\n"
        "                    except (OSError, ValueError, OverflowError):\n"
        "                        pass\n"
        "        except OSError:\n"
        "            pass\n"
        "    sys.stdout.write(''.join('\\n' + nonce.decode() + '\\n' for nonce in found))\n"
        "    sys.stdout.flush()\n"
        "    os._exit(0)\n"
    ),
}


@pytest.mark.parametrize("program", CHECK_EXITS.values(), ids=CHECK_EXITS.keys())
async def test_a_check_passes_only_by_returning(program: str) -> None:
    results = await run_code_tests(program, SQUARE_CHECKS, timeout=10.0, memory_mb=512)
    assert [result.passed for result in results] == [False, False], [(r.reason, r.run) for r in results]


async def test_killing_the_sandbox_supervisor_is_a_failed_test_not_a_sandbox_fault() -> None:
    program = "import os\ndef square(x):\n    os.kill(2, 9)\n    return x * x\n"
    results = await run_code_tests(program, SQUARE_CHECKS, timeout=10.0)
    assert [(result.passed, result.run.exit_code) for result in results] == [(False, -9), (False, -9)]
    assert "ended the sandbox" in results[0].run.stderr
    assert await code_pass_rate(program, SQUARE_CHECKS, timeout=10.0) == 0.0


async def test_a_check_killed_by_a_signal_reports_that_signal_as_a_program_run_alone_would() -> None:
    program = "import os, signal\ndef square(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    (result,) = await run_code_tests(program, SQUARE_CHECKS[:1], timeout=10.0)
    assert (result.passed, result.reason, result.run.exit_code) == (False, "error", -9)
