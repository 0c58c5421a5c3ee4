"""The price table: the shipped defaults, a user's file over them, matching, the arithmetic, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax.client import DEFAULT_PRICES, PRICES_ENV, ModelPrice, PriceTable, PriceTableError
from benchmax.envs import Usage


def write(tmp_path: Path, text: str, name: str = "prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shipped_table_prices_common_models_and_the_embedded_one_is_free():
    table = PriceTable.load(environ={})
    assert table.sources == (str(DEFAULT_PRICES),)
    assert table.price("gpt-4o-mini") == ModelPrice(prompt=0.15, completion=0.60, cached_prompt=0.075)
    assert table.cost("SmolLM2-135M-Instruct", Usage(1000, 1000)) == 0.0
    assert table.price("claude-sonnet-4-20250514") is not None, "a glob entry covers dated names"
    assert table.price("my-own-model") is None
    assert table.cost("my-own-model", Usage(10, 10)) is None, "unknown, never 0"


def test_the_cost_prices_cached_prompt_tokens_apart_and_falls_back_to_the_prompt_price():
    with_cached = ModelPrice(prompt=2.0, completion=8.0, cached_prompt=0.5)
    assert with_cached.cost(Usage(1_000_000, 250_000, 400_000)) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.25 * 8.0)
    without = ModelPrice(prompt=2.0, completion=8.0)
    assert without.cost(Usage(1_000_000, 0, 400_000)) == pytest.approx(2.0)
    assert with_cached.cost(Usage(10, 0, 50)) == pytest.approx(10 * 0.5 / 1e6), "cached tokens are part of the prompt"


def test_a_users_file_replaces_entries_of_the_same_name_and_adds_new_ones(tmp_path):
    path = write(
        tmp_path,
        '[models."gpt-4o-mini"]\nprompt = 1\ncompletion = 2\n\n[models."local/*"]\nprompt = 0\ncompletion = 0\n'
        '[models."local/big-*"]\nprompt = 5\ncompletion = 6\n',
    )
    table = PriceTable.load(path, environ={})
    assert table.sources == (str(DEFAULT_PRICES), str(path))
    assert table.price("gpt-4o-mini") == ModelPrice(1.0, 2.0)
    assert table.price("gpt-4o") is not None, "the other defaults stay"
    assert table.price("local/small") == ModelPrice(0.0, 0.0)
    assert table.price("local/big-70b") == ModelPrice(5.0, 6.0), "the longest matching pattern wins"


def test_the_environment_variable_names_the_file_when_no_path_is_given(tmp_path):
    path = write(tmp_path, '[models.mine]\nprompt = 1\ncompletion = 1\n')
    assert PriceTable.load(environ={PRICES_ENV: str(path)}).price("mine") == ModelPrice(1.0, 1.0)
    other = write(tmp_path, '[models.theirs]\nprompt = 1\ncompletion = 1\n', "other.toml")
    chosen = PriceTable.load(other, environ={PRICES_ENV: str(path)})
    assert chosen.price("theirs") is not None and chosen.price("mine") is None, "an explicit file wins"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models.m]\nprompt = 1\n', r'\[models."m"\]: completion is missing'),
        ('[models.m]\nprompt = -1\ncompletion = 1\n', r"prompt must be a number >= 0 .*got -1"),
        ('[models.m]\nprompt = "1"\ncompletion = 1\n', r"prompt must be a number >= 0 .*got '1'"),
        ('[models.m]\nprompt = true\ncompletion = 1\n', r"prompt must be a number"),
        ('[models.m]\nprompt = 1\ncompletion = 1\ninput = 2\n', r"unknown field 'input'; the fields are prompt"),
        ("currency = 'EUR'\n", r"unknown top-level key 'currency'"),
        ("models = 3\n", r"models must be tables"),
        ("[models.m]\nprompt = = 1\n", r"not TOML: .*line 2"),
    ],
)
def test_a_bad_price_file_is_refused_with_the_file_model_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(PriceTableError, match=message) as error:
        PriceTable.load(path, environ={})
    assert str(path) in str(error.value)


def test_a_missing_price_file_says_which_option_named_it(tmp_path):
    with pytest.raises(PriceTableError, match=r"--prices .*no such price file \(copy .*prices.toml"):
        PriceTable.load(tmp_path / "nope.toml", environ={})
    with pytest.raises(PriceTableError, match=rf"\${PRICES_ENV} .*no such price file"):
        PriceTable.load(environ={PRICES_ENV: str(tmp_path / "nope.toml")})


def test_the_run_keeps_where_the_table_came_from_and_each_models_price(tmp_path):
    table = PriceTable.load(environ={})
    kept = table.describe({"gpt-4o", "unknown-model"})
    assert kept == {
        "sources": [str(DEFAULT_PRICES)],
        "models": {"gpt-4o": {"prompt": 2.5, "completion": 10.0, "cached_prompt": 1.25}, "unknown-model": None},
    }


def test_a_model_is_priced_the_same_on_every_lookup_and_after_pickling(tmp_path):
    import pickle

    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[models."acme-*"]\nprompt = 1.0\ncompletion = 2.0\n[models."acme-large"]\nprompt = 5.0\ncompletion = 6.0\n'
    )
    table = PriceTable.load(prices)

    assert [table.price("acme-small").prompt, table.price("acme-small").prompt] == [1.0, 1.0]
    assert table.price("acme-large").prompt == 5.0
    assert table.price("unpriced") is None and table.price("unpriced") is None
    copy = pickle.loads(pickle.dumps(table))
    assert copy == table
    assert copy.price("acme-small").prompt == 1.0
