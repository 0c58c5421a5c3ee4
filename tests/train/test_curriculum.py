"""Curricula: the sampler the trainer consults with every scored group, its built-ins, its state."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import torch
from signal_env import SignalEnv

from benchmax.engine import Engine
from benchmax.envs import EndlessDataset, Example, SamplingParams
from benchmax.runner import RunSession
from benchmax.store import DB_NAME
from benchmax.train import (
    POLICY_URL,
    CurriculumError,
    DifficultyFilter,
    ExamplePool,
    GroupScore,
    Levels,
    PassRateWeights,
    Sampler,
    Uniform,
    parse_curriculum,
)
from benchmax.train._policy import InProcessPolicy
from benchmax.train._rollouts import RolloutBridge


def _examples(count: int, env: str | None = None) -> list[Example[Any]]:
    prefix = f"{env}/" if env else ""
    return [Example(f"{prefix}e{index}", {"n": index}, env) for index in range(count)]


def _score(example: Example[Any], step: int, scores: tuple[float, ...]) -> GroupScore:
    return GroupScore(example, step, scores, dead=len(set(scores)) == 1)


# -- the spec -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "described"),
    [
        ("uniform", Uniform, "uniform"),
        ("filter", DifficultyFilter, "filter(recheck=8,pass=1)"),
        ("filter(recheck=3,pass=0.5)", DifficultyFilter, "filter(recheck=3,pass=0.5)"),
        ("levels(promote=0.7,window=4,start=2)", Levels, "levels(promote=0.7,window=4,pass=1,start=2)"),
        ("weights(min=0.1,max=0.6)", PassRateWeights, "weights(min=0.1,max=0.6,ema=0.2,pass=1)"),
        ("filter(recheck=2)+levels", DifficultyFilter, "filter(recheck=2,pass=1)+levels(promote=0.8,window=8,pass=1)"),
    ],
)
def test_a_curriculum_spec_names_a_sampler_that_describes_itself_the_same_way(spec, kind, described):
    sampler = parse_curriculum(spec)
    assert isinstance(sampler, kind)
    assert sampler.describe() == described
    again = parse_curriculum(sampler.describe())
    assert again.describe() == described


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "is empty"),
        ("easy-first", "unknown part 'easy-first'"),
        ("filter(wait=3)", "unknown option 'wait=3'; its options: recheck, pass"),
        ("levels(window=x)", "window must be an integer"),
        ("levels(promote=2)", "promote must be in (0, 1]"),
        ("weights(min=0.7,max=0.2)", "need 0 <= min < max <= 1"),
        ("levels+filter", "combine as filter+levels"),
        ("nowhere/sampler.py:Mine", "no file"),
    ],
)
def test_a_bad_curriculum_spec_is_refused_saying_what_to_write(spec, message):
    with pytest.raises(CurriculumError) as caught:
        parse_curriculum(spec)
    assert message in str(caught.value)


def test_a_sampler_of_your_own_loads_from_a_file_and_is_recorded_by_its_spec(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(
        "from benchmax.train import Sampler\n"
        "class FirstOnly(Sampler):\n"
        "    def draw(self, pool, step):\n"
        "        return pool.ids[0]\n"
    )
    sampler = parse_curriculum(f"{source}:FirstOnly")
    pool = ExamplePool(_examples(3))
    assert sampler.draw(pool, 0) == "e0"
    assert sampler.describe() == f"{source}:FirstOnly"
    (tmp_path / "other.py").write_text("class NotOne:\n    pass\n")
    with pytest.raises(CurriculumError, match=r"not a benchmax\.train\.Sampler subclass"):
        parse_curriculum(f"{tmp_path / 'other.py'}:NotOne")


# -- the built-ins -------------------------------------------------------------------


def test_uniform_draws_each_example_once_per_epoch_and_continues_from_its_state():
    pool = ExamplePool(_examples(5))
    sampler = Uniform(seed=3)
    first = [sampler.draw(pool, 0) for _ in range(5)]
    assert sorted(first) == sorted(pool.ids)
    state = sampler.state()
    rest = [sampler.draw(pool, 1) for _ in range(7)]
    resumed = Uniform(seed=3)
    resumed.load_state(state)
    assert [resumed.draw(pool, 1) for _ in range(7)] == rest


def test_the_filter_sets_aside_always_and_never_solved_examples_and_rechecks_them_later():
    examples = _examples(4)
    pool = ExamplePool(examples)
    sampler = DifficultyFilter(recheck=3)
    solved, hopeless = examples[0], examples[1]
    sampler.update(_score(solved, 0, (1.0, 1.0)))
    sampler.update(_score(hopeless, 0, (0.0, 0.0)))
    sampler.update(_score(examples[2], 0, (0.0, 1.0)))
    figures = sampler.figures()
    assert figures["curriculum/set_aside"] == 2
    assert figures["curriculum/set_aside_solved"] == 1 and figures["curriculum/set_aside_unsolved"] == 1
    drawn = [sampler.draw(pool, 1) for _ in range(20)]
    assert set(drawn) == {"e2", "e3"}
    assert sampler.figures()["curriculum/skipped"] > 0
    due = [sampler.draw(pool, 3) for _ in range(8)]  # step 0 + recheck 3: drawn again
    assert {"e0", "e1"} <= set(due)
    sampler.update(_score(solved, 3, (1.0, 1.0)))  # still solved: set aside twice as long
    assert sampler.state()["aside"]["e0"][:2] == [3 + 6, 2]
    sampler.update(_score(hopeless, 3, (0.0, 1.0)))  # now live: back in the draw
    assert "e1" not in sampler.state()["aside"]


def test_the_filter_rechecks_early_when_every_example_is_set_aside():
    examples = _examples(2)
    pool = ExamplePool(examples)
    sampler = DifficultyFilter(recheck=10)
    sampler.update(_score(examples[0], 0, (1.0, 1.0)))
    sampler.update(_score(examples[1], 1, (0.0, 0.0)))
    assert sampler.draw(pool, 2) == "e0"  # due first


def _level_pool(levels=("0", "1", "2")) -> ExamplePool:
    datasets = {
        (None, level): EndlessDataset(lambda index, level=level: {"level": level, "n": index}) for level in levels
    }
    streams = {key: _Indexed(dataset) for key, dataset in datasets.items()}
    return ExamplePool(_examples(1), levels={None: levels}, level_datasets=streams)


class _Indexed:
    """An endless dataset as the trainer hands it to the pool (indexed, never iterated)."""

    endless = True

    def __init__(self, dataset: EndlessDataset) -> None:
        self.dataset = dataset

    def __getitem__(self, index: int) -> Example[Any]:
        return self.dataset[index]


def test_levels_start_easy_move_up_once_the_window_passes_and_continue_from_their_state():
    pool = _level_pool()
    sampler = Levels(promote=0.8, window=2)
    sampler.start(pool)
    first = sampler.draw(pool, 0)
    assert first.payload == {"level": "0", "n": 0}
    sampler.update(_score(first, 0, (1.0, 0.0)))
    second = sampler.draw(pool, 0)
    sampler.update(_score(second, 0, (1.0, 1.0)))
    assert sampler.figures()["curriculum/level"] == 0  # (0.5 + 1.0) / 2 < 0.8
    third = sampler.draw(pool, 1)
    sampler.update(_score(third, 1, (1.0, 1.0)))
    assert sampler.figures()["curriculum/level"] == 1
    state = sampler.state()
    nxt = sampler.draw(pool, 2)
    assert nxt.payload["level"] == "1"
    resumed = Levels(promote=0.8, window=2)
    resumed.start(pool)
    resumed.load_state(state)
    assert resumed.draw(pool, 2).id == nxt.id


def test_levels_stay_at_the_hardest_and_step_down_under_demote():
    pool = _level_pool(("0", "1"))
    sampler = Levels(promote=0.5, demote=0.2, window=1, start="1")
    sampler.start(pool)
    example = sampler.draw(pool, 0)
    sampler.update(_score(example, 0, (1.0, 1.0)))
    assert sampler.figures()["curriculum/level"] == 1
    example = sampler.draw(pool, 1)
    sampler.update(_score(example, 1, (0.0, 0.0)))
    assert sampler.figures()["curriculum/level"] == 0


def test_a_level_that_does_not_exist_is_refused_naming_those_that_do():
    sampler = Levels(start="9")
    with pytest.raises(Exception, match=r"no difficulty level '9'; its levels are: 0, 1, 2"):
        sampler.start(_level_pool())
    with pytest.raises(CurriculumError, match="no env of this run exposes difficulty levels"):
        Levels().start(ExamplePool(_examples(2)))


def test_mixture_weights_follow_each_envs_pass_rate_within_the_bounds():
    examples = _examples(3, "easy") + _examples(3, "mid") + _examples(3, "hard")
    pool = ExamplePool(examples, weights={"easy": 1.0, "mid": 1.0, "hard": 1.0})
    sampler = PassRateWeights(low=0.1, high=0.6, ema=1.0)
    sampler.start(pool)
    assert sampler.shares() == pytest.approx({"easy": 1 / 3, "mid": 1 / 3, "hard": 1 / 3})
    sampler.update(_score(examples[0], 0, (1.0, 1.0, 1.0, 1.0)))
    sampler.update(_score(examples[3], 0, (1.0, 0.0, 1.0, 0.0)))
    sampler.update(_score(examples[6], 0, (0.0, 0.0, 0.0, 0.0)))
    shares = sampler.shares()
    assert shares["mid"] == pytest.approx(0.6)
    assert shares["easy"] == pytest.approx(0.2) and shares["hard"] == pytest.approx(0.2)
    drawn = [pool.get(example_id).env for example_id in (sampler.draw(pool, 1) for _ in range(300))]
    assert 0.5 < drawn.count("mid") / 300 < 0.7
    assert sampler.figures()["curriculum/mid/weight"] == pytest.approx(0.6)
    with pytest.raises(CurriculumError, match="trains one env"):
        PassRateWeights().start(ExamplePool(_examples(3)))
    with pytest.raises(CurriculumError, match="cannot hold for 3 envs"):
        PassRateWeights(low=0.4, high=0.9).start(pool)


# -- in the trainer's bridge ----------------------------------------------------------


def _bridge(tiny, tmp_path, *, curriculum=None, env=None, resume=False, **options):
    model, tokenizer = tiny
    policy = InProcessPolicy(model, tokenizer)
    env = env or SignalEnv(size=6, flat=(0, 1, 2, 3))
    engine = Engine(env)
    engine.clients.register(POLICY_URL, policy)
    dataset = list(asyncio.run(env.create_dataset("train", Path("."))))
    if resume:
        session = RunSession.resume(tmp_path / "run")
    else:
        session = RunSession.create(tmp_path / "run", kind="train", meta={})
        session.add_examples("train", dataset)
    bridge = RolloutBridge(
        engine=engine,
        examples={example.id: example for example in dataset},
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=1.0, max_tokens=4),
        policy=policy,
        session=session,
        known_components=frozenset({"score"}),
        example_index={example.id: index for index, example in enumerate(dataset)},
        async_steps=0,
        curriculum=curriculum,
        pool=ExamplePool(options.pop("pool_examples", dataset)) if curriculum is not None else None,
        **options,
    )
    return bridge, policy, session


def _close(bridge, policy, session):
    bridge.loop.run(bridge.aclose_pipeline())
    bridge.loop.run(bridge.engine.aclose())
    bridge.loop.close()
    policy.close()
    session.close()


def _dead_generated(tiny, tmp_path, curriculum) -> tuple[int, list[dict[str, float]]]:
    torch.manual_seed(0)
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=curriculum, max_refill=4)
    try:
        batches = [bridge.step_batch(step, groups=2, group_size=2) for step in range(6)]
    finally:
        _close(bridge, policy, session)
    return sum(int(batch.metrics["groups/dead"]) for batch in batches), [dict(b.metrics) for b in batches]


def test_the_filter_generates_fewer_dead_groups_than_drawing_every_example_each_epoch(tiny, tmp_path):
    plain, _ = _dead_generated(tiny, tmp_path / "plain", None)
    filtered, metrics = _dead_generated(tiny, tmp_path / "filtered", DifficultyFilter(recheck=100))
    # four of six examples are always dead: once each is set aside it is not drawn again
    assert filtered <= 4 < plain
    assert metrics[-1]["curriculum/set_aside"] == 4
    assert metrics[-1]["curriculum/set_aside_solved"] == 4


def test_the_curriculums_state_is_kept_each_step_and_a_resumed_bridge_continues_from_it(tiny, tmp_path):
    torch.manual_seed(0)
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=DifficultyFilter(recheck=100), max_refill=4)
    try:
        for step in range(3):
            bridge.step_batch(step, groups=2, group_size=2)
        kept = bridge.curriculum.state()
    finally:
        _close(bridge, policy, session)
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        steps = [row[0] for row in conn.execute("SELECT step FROM sampler_states ORDER BY step")]
    assert steps == [0, 1, 2]
    resumed_filter = DifficultyFilter(recheck=100)
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=resumed_filter, resume=True, max_refill=4)
    try:
        batch = bridge.step_batch(3, groups=2, group_size=2)  # restored before its first draw
    finally:
        _close(bridge, policy, session)
    assert set(kept["aside"]) <= set(resumed_filter.state()["aside"])
    assert batch.metrics["curriculum/set_aside"] >= len(kept["aside"])


class _Raises(Sampler):
    def draw(self, pool, step):
        raise RuntimeError("the level table is empty")


class _Unknown(Sampler):
    def draw(self, pool, step):
        return "no-such-example"


class _BadUpdate(Sampler):
    def draw(self, pool, step):
        return pool.ids[0]

    def update(self, group):
        raise KeyError(group.example.id)


@pytest.mark.parametrize(
    ("sampler", "message"),
    [
        (_Raises(), "raised in draw(): RuntimeError: the level table is empty"),
        (_Unknown(), "returned 'no-such-example' at step 1, which is no example of this run"),
        (_BadUpdate(), "raised in update(): KeyError"),
    ],
)
def test_a_sampler_that_raises_or_returns_an_unknown_example_stops_the_run_naming_it(tiny, tmp_path, sampler, message):
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=sampler)
    try:
        with pytest.raises(CurriculumError) as caught:
            bridge.step_batch(0, groups=2, group_size=2)
    finally:
        _close(bridge, policy, session)
    assert message in str(caught.value)
    assert type(sampler).__name__ in str(caught.value)
    assert f"benchmax train --resume {tmp_path / 'run'}" in str(caught.value)
    RunSession.resume(tmp_path / "run").close()  # the store is resumable


def test_an_endless_dataset_is_drawn_as_needed_and_each_new_example_stored(tiny, tmp_path):
    env = SignalEnv(size=6, flat=())
    endless = EndlessDataset(
        lambda index: {"prompt_messages": [{"role": "user", "content": f"q {index}"}], "flat": False}
    )

    class Stream:
        def example_at(self, index):
            return endless[index]

    first = [endless[index] for index in range(2)]
    torch.manual_seed(0)
    model, tokenizer = tiny
    policy = InProcessPolicy(model, tokenizer)
    engine = Engine(env)
    engine.clients.register(POLICY_URL, policy)
    session = RunSession.create(tmp_path / "run", kind="train", meta={})
    session.add_examples("train", first)
    bridge = RolloutBridge(
        engine=engine,
        examples={example.id: example for example in first},
        tokenizer=tokenizer,
        base_url=POLICY_URL,
        sampling=SamplingParams(temperature=1.0, max_tokens=4),
        policy=policy,
        session=session,
        known_components=frozenset({"score"}),
        async_steps=0,
        dead_groups="keep",
        curriculum=Uniform(),
        pool=ExamplePool(first, endless={None: Stream()}),
    )
    try:
        batches = [bridge.step_batch(step, groups=2, group_size=2) for step in range(3)]
    finally:
        _close(bridge, policy, session)
    ran = [outcome.example_id for batch in batches for outcome in batch.outcomes[::2]]
    assert ran == [endless[index].id for index in range(6)]
    with sqlite3.connect(tmp_path / "run" / DB_NAME) as conn:
        stored = conn.execute("SELECT example_id, idx FROM examples ORDER BY idx").fetchall()
    assert stored == [(endless[index].id, index) for index in range(6)]


def _documented_sampler() -> type[Sampler]:
    """The sampler of docs/training.md ("Your own sampler"), run as the page shows it."""
    page = (Path(__file__).parents[2] / "docs" / "training.md").read_text()
    block = page.split("### Your own sampler", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(block.replace('train("examples/format", model="embedded", sampler=RetryFailures())', ""), namespace)
    return namespace["RetryFailures"]


def test_the_documented_sampler_of_your_own_runs_in_the_trainer_and_resumes_from_its_state(tiny, tmp_path):
    retry_failures = _documented_sampler()
    torch.manual_seed(0)
    sampler = retry_failures()
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=sampler, env=SignalEnv(size=6, flat=(0, 1)))
    try:
        batches = [bridge.step_batch(step, groups=2, group_size=2) for step in range(2)]
    finally:
        _close(bridge, policy, session)
    assert all("curriculum/retry_queue" in batch.metrics for batch in batches)
    assert sampler.drawn > 0
    resumed = retry_failures()
    bridge, policy, session = _bridge(tiny, tmp_path, curriculum=resumed, resume=True)
    try:
        bridge._restore_curriculum(2)  # what the first draw of a resumed run does
        restored = resumed.state()
        bridge.step_batch(2, groups=2, group_size=2)
    finally:
        _close(bridge, policy, session)
    assert restored == sampler.state()
    assert resumed.drawn >= sampler.drawn


def test_uniform_draws_what_a_run_without_a_curriculum_draws_so_a_filter_departs_from_it_only_when_it_skips():
    from benchmax.train._groups import ExampleSampler

    examples = _examples(7)
    pool = ExamplePool(examples + examples[:2])  # a repeat in the dataset is one example
    plain = ExampleSampler([example.id for example in examples], seed=5)
    curriculum = parse_curriculum("filter", seed=5)
    assert [curriculum.draw(pool, 0) for _ in range(20)] == [plain.next() for _ in range(20)]
    resumed = parse_curriculum("filter", seed=5)
    resumed.load_state(curriculum.state())
    assert [resumed.draw(pool, 0) for _ in range(9)] == [plain.next() for _ in range(9)]
