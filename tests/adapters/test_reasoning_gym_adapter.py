"""``reasoning-gym:TASK[,TASK...]``: a first-class spec whose rewards are reasoning-gym's own ``score_answer``.

reasoning-gym has no runner of its own: its way to grade is the dataset's ``score_answer`` on the text
its ``extract_answer`` finds. The test asks the scripted server itself for each generated question and
grades the replies that way, then runs ``benchmax eval`` on the same server and compares every example.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytest.importorskip("reasoning_gym", reason="pip install 'benchmax[gallery]'")

import reasoning_gym
from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer
from runkit import cli_env, run_cli

from benchmax import open_run
from benchmax.adapters import split_seed
from benchmax.testing import ScriptedServer

TASKS = ("basic_arithmetic", "word_sorting", "countdown")
SEED, SIZE = 3, 4


def datasets() -> dict[str, object]:
    return {task: reasoning_gym.create_dataset(task, seed=split_seed(SEED, "eval"), size=SIZE) for task in TASKS}


def policy_for(sets: dict[str, object]):
    """Right answers for even items, wrong ones for odd items, an untagged reply for the last item of each task."""
    replies = {}
    for dataset in sets.values():
        for index in range(SIZE):
            entry = dataset[index]
            if index == SIZE - 1:
                replies[entry["question"]] = f"It is {entry['answer']}"
            elif index % 2 == 0:
                replies[entry["question"]] = f"<think>ok</think><answer>{entry['answer']}</answer>"
            else:
                replies[entry["question"]] = "<answer>1 + 1</answer>"

    def policy(body: dict) -> dict:
        question = body["messages"][-1]["content"]
        return {"content": replies.get(question, "?")}

    return policy


def reasoning_gym_grades(sets: dict[str, object], server: ScriptedServer) -> dict[str, float]:
    """Each question's reply graded as reasoning-gym grades: ``dataset.score_answer(extract_answer(reply), entry)``."""
    grades = {}
    with httpx.Client(timeout=30) as client:
        for dataset in sets.values():
            for index in range(SIZE):
                entry = dataset[index]
                messages = [
                    {"role": "system", "content": SYSTEM_PROMPTS["default"]},
                    {"role": "user", "content": entry["question"]},
                ]
                reply = client.post(f"{server.base_url}/chat/completions", json={"model": "s", "messages": messages})
                text = reply.json()["choices"][0]["message"]["content"]
                grades[entry["question"]] = float(dataset.score_answer(extract_answer(text), entry))
    return grades


def test_every_example_scores_what_reasoning_gyms_own_score_answer_gives(tmp_path):
    sets = datasets()
    with ScriptedServer(policy_for(sets)) as server:
        expected = reasoning_gym_grades(sets, server)
        result = run_cli(
            "eval", f"reasoning-gym:{','.join(TASKS)}", "--env-arg", f"seed={SEED}", "--env-arg", f"size={SIZE}",
            "--split", "eval", "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
            env=cli_env(),
        )  # fmt: skip
    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        got = {record.messages[1]["content"]: record.rewards["correct"] for record in run.rollouts()}
    assert got == expected
    assert len(set(expected.values())) >= 3  # right (1.0), wrong and untagged answers grade apart


async def test_several_tasks_interleave_and_each_example_names_its_task():
    from benchmax.loading import EnvSpec

    env = EnvSpec("reasoning-gym:basic_arithmetic,word_sorting", {"size": 3}).load()
    dataset = await env.create_dataset("eval", Path.cwd())
    assert [example.payload["task"] for example in dataset] == ["basic_arithmetic", "word_sorting"] * 3
    capped = await env.create_dataset("eval", Path.cwd(), max_examples=3)
    assert [e.id for e in capped] == [e.id for e in dataset][:3]


@pytest.mark.parametrize(
    ("spec", "args", "message"),
    [
        ("reasoning-gym:no_such_task", [], "unknown reasoning-gym task(s) no_such_task"),
        ("reasoning-gym:chain_sum,", [], "write reasoning-gym:TASK[,TASK...]"),
        ("reasoning-gym:chain_sum", ["--env-arg", "size=0"], "size must be a positive int"),
        ("reasoning-gym:chain_sum,countdown", ["--env-arg", 'config={"min_terms": 2}'], "config maps each task"),
    ],
)
def test_a_bad_spec_or_argument_is_refused_with_exit_2_and_the_reason(tmp_path, spec, args, message):
    result = run_cli(
        "eval", spec, *args, "--base-url", "http://127.0.0.1:9/v1", "--model", "scripted",
        "--run-dir", tmp_path / "run", env=cli_env(),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert message in " ".join(result.stdout.split())
