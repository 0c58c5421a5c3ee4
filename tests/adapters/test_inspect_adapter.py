"""``inspect:PATH.py@TASK``: an Inspect AI task runs in benchmax and scores exactly as ``inspect_ai.eval`` scores it.

Both runners are pointed at the same scripted OpenAI-compatible server on loopback, with a task file
the test writes: the prompts the server receives and every sample's scores are compared one by one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai", reason="pip install 'benchmax[inspect-ai]'")
import inspect_scripted  # noqa: F401 (registers the "scripted" Inspect model provider)
from runkit import cli_env, run_cli

from benchmax import open_run
from benchmax.testing import ScriptedServer

TASKS = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import (
    Score, CORRECT, INCORRECT, PARTIAL, NOANSWER, choice, includes, match, mean, scorer, accuracy,
)
from inspect_ai.solver import chain_of_thought, generate, multiple_choice, prompt_template, system_message, user_message


@scorer(metrics=[mean()])
def brevity():
    """A numeric score: 1 for an answer of at most 12 characters, falling to 0 at 60."""
    async def score(state, target):
        size = len(state.output.completion)
        return Score(value=max(0.0, min(1.0, (60 - size) / 48)))
    return score


@scorer(metrics={"exact": [accuracy()], "graded": [mean()]})
def graded():
    """A dict value with C/I/P/N letters: one reward component per key."""
    async def score(state, target):
        text = state.output.completion
        letter = CORRECT if target.text in text else (PARTIAL if any(c.isdigit() for c in text) else NOANSWER)
        return Score(value={"exact": CORRECT if text.strip().endswith(target.text) else INCORRECT, "graded": letter})
    return score


@task
def arithmetic(level="easy"):
    return Task(
        dataset=[
            Sample(input="What is 2+2?", target="4", id="add", metadata={"topic": "sums"}),
            Sample(input="What is 3*3?", target="9", metadata={"topic": "products"}),
            Sample(input="What is 10-7?", target="3", id=7, metadata={"topic": "differences"}),
            Sample(input="Name a prime.", target=["2", "3", "5", "7"], metadata={"topic": "primes"}),
            Sample(input="What is 6/2?", target="3", metadata={"topic": "quotients"}),
        ],
        solver=[
            system_message("You are a careful calculator for {topic} (" + level + ")."),
            prompt_template("Question: {prompt}\\nReply briefly."),
            chain_of_thought(),
            user_message("Remember: end with ANSWER: <number>."),
            generate(),
        ],
        scorer=[match(), includes(), brevity(), graded(), match(location="any")],
    )


@task
def quiz():
    return Task(
        dataset=[
            Sample(input="Which is a colour?", choices=["dog", "red", "car"], target="B"),
            Sample(input="Which is an animal?", choices=["dog", "red", "car"], target="A"),
            Sample(input="Which is a vehicle?", choices=["dog", "red", "car"], target="C"),
        ],
        solver=multiple_choice(),
        scorer=choice(),
    )
'''

ANSWERS = {
    "2+2": "Two and two.\nANSWER: 4",
    "3*3": "ANSWER: 8",
    "10-7": "I do not know",
    "prime": "ANSWER: 7",
    "6/2": "It is 3, I am sure, after long and careful thought about it.\nANSWER: 3",
    "colour": "ANSWER: B",
    "animal": "ANSWER: C",
    "vehicle": "I would say ANSWER: C",
}


def policy(body: dict) -> dict:
    """Answers keyed by the question: right, wrong, partial and empty-handed ones, the same for both runners."""
    text = "\n".join(str(m.get("content")) for m in body["messages"])
    for key, answer in ANSWERS.items():
        if key in text:
            return {"content": answer}
    return {"content": "?"}


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks" / "evals.py"
    path.parent.mkdir()
    path.write_text(TASKS)
    return path


def inspect_scores(file: Path, task: str, server: ScriptedServer, log_dir: Path, **task_args) -> dict:
    """``inspect_ai.eval`` on the task: each sample's scores as floats (Inspect's ``value_to_float``)."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.scorer import value_to_float

    (log,) = inspect_eval(
        f"{file}@{task}", task_args=task_args, model="scripted/scripted", model_base_url=server.base_url,
        log_dir=str(log_dir), display="none", max_connections=2,
    )  # fmt: skip
    assert log.status == "success", log.error
    to_float = value_to_float()
    scores = {}
    for sample in log.samples:
        flat = {}
        for name, score in sample.scores.items():
            if isinstance(score.value, dict):
                flat.update({f"{name}/{key}": to_float(value) for key, value in score.value.items()})
            else:
                flat[name] = to_float(score.value)
        scores[str(sample.id)] = flat
    return scores


def benchmax_scores(spec: str, server: ScriptedServer, run_dir: Path, *extra: str) -> dict:
    result = run_cli(
        "eval", spec, "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_dir, "--split", "eval",
        *extra, env=cli_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    with open_run(run_dir) as run:
        return {record.example_id: dict(record.rewards) for record in run.rollouts()}


def prompts(server: ScriptedServer) -> list[list[dict]]:
    return sorted(
        ([{"role": m["role"], "content": m["content"]} for m in request["messages"]] for request in server.requests),
        key=json.dumps,
    )


@pytest.mark.parametrize(("task", "args"), [("arithmetic", {}), ("arithmetic", {"level": "hard"}), ("quiz", {})])
def test_every_sample_scores_as_inspect_eval_scores_it_from_the_same_prompts(tmp_path, task_file, task, args):
    with ScriptedServer(policy) as server:
        expected = inspect_scores(task_file, task, server, tmp_path / "logs", **args)
        inspect_prompts = prompts(server)
        server.requests.clear()
        env_args = [f"--env-arg={key}={value}" for key, value in args.items()]
        got = benchmax_scores(f"inspect:{task_file}@{task}", server, tmp_path / "run", *env_args)
        benchmax_prompts = prompts(server)

    assert got == expected
    assert benchmax_prompts == inspect_prompts
    # The comparison is not vacuous: some answers pass and some fail, on every scorer.
    assert len({json.dumps(scores, sort_keys=True) for scores in expected.values()}) >= 2
    for name in expected[next(iter(expected))]:
        assert len({scores[name] for scores in expected.values()}) >= 2, name


def test_a_file_with_several_tasks_must_name_one_and_the_error_lists_them(tmp_path, task_file):
    result = run_cli("validate", f"inspect:{task_file}", env=cli_env())
    assert result.returncode == 2, result.stdout
    assert "holds 2 tasks (arithmetic, quiz)" in result.stdout
    assert f"inspect:{task_file}@TASK" in " ".join(result.stdout.split())


def test_validate_accepts_an_inspect_task(tmp_path, task_file):
    result = run_cli("validate", f"inspect:{task_file}@arithmetic", env=cli_env())
    assert result.returncode == 0, result.stdout


SELF_CRITIQUE = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate, self_critique

@task
def critiqued():
    return Task(dataset=[Sample(input="1+1?", target="2")], solver=[generate(), self_critique()], scorer=match())
"""

TOOLS = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool

@tool
def add():
    async def execute(a: int, b: int):
        """Add two numbers.

        Args:
            a: first
            b: second
        """
        return a + b
    return execute

@task
def tooled():
    return Task(dataset=[Sample(input="1+1?", target="2")], solver=[use_tools(add()), generate()], scorer=match())
'''


@pytest.mark.parametrize(
    ("source", "task", "message"),
    [
        (SELF_CRITIQUE, "critiqued", "solver 2 (self_critique) needs the model itself"),
        (TOOLS, "tooled", "solver 2 (generate) gives the model tools"),
    ],
)
def test_tasks_whose_solvers_need_the_model_are_refused_with_exit_2_and_the_reason(tmp_path, source, task, message):
    file = tmp_path / "task.py"
    file.write_text(source)
    with ScriptedServer(policy) as server:
        result = run_cli(
            "eval", f"inspect:{file}@{task}", "--base-url", server.base_url, "--model", "scripted",
            "--run-dir", tmp_path / "run", env=cli_env(),
        )  # fmt: skip
        assert not server.requests
    assert result.returncode == 2, result.stdout
    assert message in " ".join(result.stdout.split())


def test_an_unknown_task_names_the_tasks_the_file_has(tmp_path, task_file):
    result = run_cli("validate", f"inspect:{task_file}@nope", env=cli_env())
    assert result.returncode == 2, result.stdout
    assert "no task 'nope'" in result.stdout and "arithmetic, quiz" in result.stdout
