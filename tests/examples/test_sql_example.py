"""examples/sql: a fresh SQLite file per rollout, read-only limited tools, result-set rewards."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import orjson
import pytest

from benchmax.envs import RolloutRequest
from benchmax.testing import ScriptedServer


def database_paths(outcome) -> list[Path]:
    found = [re.fullmatch(r"database for .+ at (.+)", entry.message) for entry in outcome.logs]
    return [Path(match.group(1)) for match in found if match]


def turns(steps: list[dict]):
    return lambda body: steps[min(sum(m["role"] == "assistant" for m in body["messages"]), len(steps) - 1)]


def query(sql: str) -> dict:
    return {"tool_calls": [{"name": "query", "arguments": {"sql": sql}}]}


def answer(sql: str) -> dict:
    return {"content": f"Here it is.\n```sql\n{sql}\n```"}


async def run_all(env, dataset, server, make_engine):
    engine = make_engine(env)
    requests = [RolloutRequest(f"sql-{i}", example, "scripted", server.base_url) for i, example in enumerate(dataset)]
    results = await asyncio.gather(*(engine.run_group([request]) for request in requests))
    return [outcome for result in results for outcome in result.outcomes]


async def one_question(env, example_dir, text: str):
    dataset = await env.create_dataset("train", example_dir("sql"))
    (example,) = [e for e in dataset if text in e.payload["prompt_messages"][-1]["content"]]
    return [example]


def test_the_examples_directory_loads_as_one_env_class(load_example):
    assert load_example("sql").__name__ == "SqlEnv"


@pytest.mark.parametrize("split", ["train", "eval"])
async def test_a_model_that_explores_and_answers_with_the_right_query_scores_one(
    load_example, load_policy, example_dir, make_engine, split
):
    env = load_example("sql")()
    dataset = await env.create_dataset(split, example_dir("sql"))
    with ScriptedServer(load_policy("sql")(dataset)) as server:
        outcomes = await run_all(env, dataset, server, make_engine)
    assert len(outcomes) == len(dataset) >= 6
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards == {"correct": 1.0}, outcome.messages
        tables, described, rows = (orjson.loads(m["content"]) for m in outcome.messages if m["role"] == "tool")
        assert tables == ["customers", "order_items", "orders", "products"]
        assert described["rows"] == 15
        assert described["columns"][0] == {"name": "id", "type": "INTEGER", "primary_key": True}
        assert rows["rows"]
        (path,) = database_paths(outcome)
        assert path.name == "shop.sqlite" and not path.parent.exists()
    assert env._databases == {}


async def test_wrong_failing_or_missing_answers_score_zero(load_example, example_dir, make_engine):
    env = load_example("sql")()
    dataset = await env.create_dataset("eval", example_dir("sql"), max_examples=2)
    outcomes = []
    for reply in [answer("SELECT 1"), answer("SELECT nonsense FROM nowhere"), {"content": "No idea."}]:
        with ScriptedServer(lambda body, reply=reply: reply) as server:
            outcomes += await run_all(env, dataset, server, make_engine)
    assert [o.rewards for o in outcomes] == [{"correct": 0.0}] * 6


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO customers VALUES (99, 'Eve', 'Nowhere', '2024-01-01')",
        "UPDATE products SET price = 0",
        "DELETE FROM orders",
        "DROP TABLE order_items",
        "CREATE TABLE notes (text TEXT)",
        "ATTACH DATABASE '/tmp/benchmax-sql-attack.sqlite' AS other",
        "PRAGMA query_only = OFF",
        "VACUUM INTO '/tmp/benchmax-sql-copy.sqlite'",
        "SELECT load_extension('/tmp/nothing')",
    ],
)
async def test_the_query_tool_refuses_anything_but_reading(load_example, example_dir, statement):
    env = load_example("sql")()
    (example,) = await env.create_dataset("train", example_dir("sql"), max_examples=1)
    async with env.rollout_context("r", example):
        before = await env.run_tool("r", "query", sql="SELECT COUNT(*) FROM customers")
        with pytest.raises(Exception, match="read-only: only SELECT queries are allowed"):
            await env.run_tool("r", "query", sql=statement)
        assert await env.run_tool("r", "query", sql="SELECT COUNT(*) FROM customers") == before
        assert await env.run_tool("r", "list_tables") == ["customers", "order_items", "orders", "products"]
    assert not Path("/tmp/benchmax-sql-attack.sqlite").exists()
    assert not Path("/tmp/benchmax-sql-copy.sqlite").exists()


async def test_tool_errors_reach_the_model_and_the_rollout_goes_on(load_example, example_dir, make_engine):
    env = load_example("sql")(max_rows=3, query_timeout=0.3)
    dataset = await one_question(env, example_dir, "How many customers live in London")
    steps = [
        query("DELETE FROM customers"),
        query("SELECT 1; SELECT 2"),
        query("SELEC name FROM customers"),
        query("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT COUNT(*) FROM r"),
        query("SELECT name FROM customers ORDER BY id"),
        {"tool_calls": [{"name": "describe", "arguments": {"table": "clients"}}]},
        answer("SELECT COUNT(*) FROM customers WHERE city = 'London'"),
    ]
    with ScriptedServer(turns(steps)) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    assert outcome.termination_reason == "finished", outcome.error
    results = [m["content"] for m in outcome.messages if m["role"] == "tool"]
    assert results[0] == "error: the database is read-only: only SELECT queries are allowed (not authorized)"
    assert results[1] == "error: SQL error: You can only execute one statement at a time."
    assert results[2].startswith("error: SQL error: near \"SELEC\": syntax error")
    assert results[3] == "error: the query ran past the 0.3 s time limit and was stopped"
    assert orjson.loads(results[4]) == {
        "columns": ["name"],
        "rows": [["Ada Byron"], ["Grace Hopper"], ["Alan Turing"]],
        "note": "only the first 3 rows are shown",
    }
    assert results[5] == "error: no table named 'clients'; tables: customers, order_items, orders, products"
    assert outcome.rewards == {"correct": 1.0}


async def test_row_order_counts_only_when_the_gold_query_orders(load_example, example_dir, make_engine):
    env = load_example("sql")()
    unordered = await one_question(env, example_dir, "electronics category")
    ordered = await one_question(env, example_dir, "joined in 2024")
    reversed_electronics = "SELECT name FROM products WHERE category = 'electronics' ORDER BY name DESC"
    reversed_joined = "SELECT name FROM customers WHERE joined >= '2024-01-01' ORDER BY joined DESC"
    with ScriptedServer(lambda body: answer(reversed_electronics)) as server:
        (any_order,) = await run_all(env, unordered, server, make_engine)
    with ScriptedServer(lambda body: answer(reversed_joined)) as server:
        (wrong_order,) = await run_all(env, ordered, server, make_engine)
    assert any_order.rewards == {"correct": 1.0}
    assert wrong_order.rewards == {"correct": 0.0}


async def test_duplicated_rows_do_not_match_a_set_of_distinct_rows(load_example, example_dir, make_engine):
    env = load_example("sql")()
    dataset = await one_question(env, example_dir, "electronics category")
    doubled = "SELECT name FROM products WHERE category = 'electronics' UNION ALL SELECT 'USB cable'"
    with ScriptedServer(lambda body: answer(doubled)) as server:
        (outcome,) = await run_all(env, dataset, server, make_engine)
    assert outcome.rewards == {"correct": 0.0}


async def test_every_rollout_gets_its_own_fresh_database_file(load_example, example_dir):
    env = load_example("sql")()
    (example,) = await env.create_dataset("train", example_dir("sql"), max_examples=1)
    async with env.rollout_context("a", example), env.rollout_context("b", example):
        paths = {database.path for database in env._databases.values()}
        assert len(paths) == 2 and all(path.is_file() for path in paths)
    assert not any(path.parent.exists() for path in paths)
    assert env._databases == {}


def test_a_missing_schema_file_is_refused_at_construction(load_example, tmp_path):
    with pytest.raises(ValueError, match=r"schema file .*missing\.sql does not exist"):
        load_example("sql")(schema=tmp_path / "missing.sql")
