"""examples/reasoning_gym: generated tasks, deterministic splits, the package's own scorers."""

from __future__ import annotations

import asyncio

import pytest

from benchmax.envs import LevelledEnv, RolloutRequest, UnknownLevelError, is_endless
from benchmax.testing import ScriptedServer

TASKS = ["basic_arithmetic", "countdown", "word_sorting", "letter_counting", "spell_backward"]


async def run_all(env, dataset, server, make_engine):
    engine = make_engine(env)
    requests = [RolloutRequest(f"rg-{i}", example, "scripted", server.base_url) for i, example in enumerate(dataset)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


def questions(dataset) -> list[str]:
    return [example.payload["entry"]["question"] for example in dataset]


def _mean_length(texts: list[str]) -> float:
    return sum(len(text) for text in texts) / len(texts)


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("reasoning_gym").__name__ == "ReasoningGymEnv"


@pytest.mark.parametrize("task", TASKS)
async def test_correct_answers_in_answer_tags_score_one_on_both_components(
    load_example, load_policy, example_dir, make_engine, task
):
    env = load_example("reasoning_gym")(task=task, seed=3, size=6)
    dataset = await env.create_dataset("eval", example_dir("reasoning_gym"))
    with ScriptedServer(load_policy("reasoning_gym")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == 6
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"correct": 1.0, "format": 1.0}, outcome.messages


@pytest.mark.parametrize("task", ["basic_arithmetic", "word_sorting"])
async def test_answers_without_tags_score_zero(load_example, example_dir, make_engine, task):
    env = load_example("reasoning_gym")(task=task, seed=3, size=4)
    dataset = await env.create_dataset("train", example_dir("reasoning_gym"))
    with ScriptedServer(lambda body: {"content": "The answer is probably 7."}) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in outcomes] == [{"correct": 0.0, "format": 0.0}] * 4


async def test_a_wrong_answer_gets_what_the_package_scorer_gives(load_example, example_dir, make_engine):
    # countdown's own scorer keeps a floor of 0.01 (0.05 for using the right numbers): passed through as is.
    env = load_example("reasoning_gym")(task="countdown", seed=3, size=2)
    dataset = await env.create_dataset("eval", example_dir("reasoning_gym"))
    with ScriptedServer(lambda body: {"content": "<answer>1 + 1</answer>"}) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in outcomes] == [{"correct": 0.05, "format": 1.0}] * 2


async def test_two_answer_tags_break_the_format_but_the_last_one_is_scored(load_example, example_dir, make_engine):
    env = load_example("reasoning_gym")(task="basic_arithmetic", seed=3, size=1)
    dataset = await env.create_dataset("eval", example_dir("reasoning_gym"))
    answer = dataset[0].payload["entry"]["answer"]
    with ScriptedServer(lambda body: {"content": f"<answer>0</answer> no wait <answer>{answer}</answer>"}) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    assert outcome.rewards == {"correct": 1.0, "format": 0.0}


async def test_splits_are_deterministic_disjoint_and_seeded(load_example, example_dir):
    cls = load_example("reasoning_gym")
    base = example_dir("reasoning_gym")
    first = cls(task="word_sorting", seed=5, size=12)
    again = cls(task="word_sorting", seed=5, size=12)
    other = cls(task="word_sorting", seed=6, size=12)
    train = await first.create_dataset("train", base)
    evaluation = await first.create_dataset("eval", base)
    assert [e.id for e in train] == [e.id for e in await again.create_dataset("train", base)]
    assert [e.id for e in evaluation] == [e.id for e in await again.create_dataset("eval", base)]
    assert len(train) == len(evaluation) == 12
    assert not set(questions(train)) & set(questions(evaluation))
    assert not set(questions(evaluation)) & set(questions(await other.create_dataset("eval", base)))


async def test_max_examples_takes_a_prefix_of_the_full_split(load_example, example_dir):
    env = load_example("reasoning_gym")(task="chain_sum", seed=1, size=20)
    full = await env.create_dataset("train", example_dir("reasoning_gym"))
    capped = await env.create_dataset("train", example_dir("reasoning_gym"), max_examples=4)
    assert [e.id for e in capped] == [e.id for e in full][:4]
    assert len(await env.create_dataset("eval", example_dir("reasoning_gym"), max_examples=0)) == 0


async def test_task_options_reach_the_generator(load_example, example_dir):
    env = load_example("reasoning_gym")(task="word_sorting", size=5, config={"min_words": 2, "max_words": 2})
    dataset = await env.create_dataset("eval", example_dir("reasoning_gym"))
    assert all(len(e.payload["entry"]["answer"].split(", ")) == 2 for e in dataset)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "no_such_task"}, r"unknown reasoning-gym task 'no_such_task'; tested ones: basic_arithmetic"),
        ({"seed": -1}, "seed must be a non-negative int"),
        ({"size": 0}, "size must be a positive int"),
        ({"level": 9}, r"has no difficulty level '9'; its levels are: 0, 1, 2, 3, 4"),
        ({"endless": "yes"}, "endless must be true or false"),
    ],
)
def test_bad_constructor_arguments_are_refused_with_the_reason(load_example, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_example("reasoning_gym")(**kwargs)


async def test_a_task_with_a_curriculum_exposes_its_levels_and_a_harder_level_generates_harder_items(
    load_example, example_dir
):
    env = load_example("reasoning_gym")(task="basic_arithmetic", seed=2)
    assert isinstance(env, LevelledEnv)
    assert env.difficulty_levels() == ("0", "1", "2", "3", "4")
    base = example_dir("reasoning_gym")
    easy = await env.create_level_dataset("0", "train", base)
    hard = await env.create_level_dataset("4", "train", base)
    assert is_endless(easy) and is_endless(hard)
    lengths = [_mean_length(questions([dataset[i] for i in range(20)])) for dataset in (easy, hard)]
    assert lengths[1] > 1.5 * lengths[0]  # level 4: more terms, more digits
    same = load_example("reasoning_gym")(task="basic_arithmetic", seed=2)
    again = await same.create_level_dataset("4", "train", base)
    assert [again[i].id for i in range(5)] == [hard[i].id for i in range(5)]
    capped = await env.create_level_dataset("1", "train", base, max_examples=3)
    assert len(capped) == 3
    with pytest.raises(UnknownLevelError, match="its levels are: 0, 1, 2, 3, 4"):
        await env.create_level_dataset("hard", "train", base)


async def test_level_picks_the_generator_options_of_one_level_for_both_splits(load_example, example_dir):
    base = example_dir("reasoning_gym")
    env = load_example("reasoning_gym")(task="basic_arithmetic", size=20, level="0")
    hard = load_example("reasoning_gym")(task="basic_arithmetic", size=20, level="4")
    for split in ("train", "eval"):
        easy_length = _mean_length(questions(await env.create_dataset(split, base)))
        hard_length = _mean_length(questions(await hard.create_dataset(split, base)))
        assert hard_length > 1.5 * easy_length


async def test_endless_splits_generate_without_end_and_keep_train_off_the_held_out_questions(load_example, example_dir):
    base = example_dir("reasoning_gym")
    env = load_example("reasoning_gym")(task="basic_arithmetic", seed=4, size=32, endless=True)
    train = await env.create_dataset("train", base)
    evaluation = await env.create_dataset("eval", base)
    assert is_endless(train) and is_endless(evaluation)
    held_out = set(questions(await env.create_dataset("eval", base, max_examples=32)))
    assert len(held_out) > 10
    assert not set(questions([train[index] for index in range(200)])) & held_out
    assert train[150].id == (await env.create_dataset("train", base))[150].id
    assert [e.id for e in await env.create_dataset("train", base, max_examples=3)] == [train[i].id for i in range(3)]
