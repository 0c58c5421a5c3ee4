"""The compat scenarios: upstream-style envs, small data with scripted model turns, and what 0.2.5 gives.

What benchmax 0.2.5 produced for each scenario is recorded in
``reference_0.2.5.json`` by ``record_reference.py``, which runs
``reference_harness.py`` in the reference venv; the side-by-side test re-checks
it live whenever that interpreter is available. ``kept`` gives this project's
outcome where it deliberately differs, with the reason ``docs/migrating.md``
gives; everything else must match exactly.

Per example, an outcome is ``(termination_reason, rewards)``; siblings of a
group are compared as a sorted list, since which sibling got which scripted
variant depends on arrival order.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENVS = Path(__file__).resolve().parent / "envs"

Outcome = tuple[str, dict[str, float]]


def script(*steps: dict[str, Any]) -> str:
    """The prompt line the scripted server plays, one step per model turn."""
    return "#script: " + json.dumps(list(steps))


def ask(question: str, *steps: dict[str, Any]) -> str:
    return f"{question}\n{script(*steps)}"


def variants(question: str, *answers: dict[str, Any]) -> str:
    """A single-turn prompt whose k-th sibling request gets the k-th reply (see :class:`ModelPolicy`)."""
    return f"{question}\n#variants: {json.dumps(list(answers))}"


def call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
    if call_id:
        entry["id"] = call_id
    return entry


_VARIANTS = re.compile(r"#variants:\s*(\[.*\])\s*$", re.MULTILINE | re.DOTALL)


class ModelPolicy:
    """The scripted server's fallback: ``#variants`` prompts hand out their replies in arrival order."""

    def __init__(self) -> None:
        self._served: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        for message in messages:
            content = message.get("content")
            match = _VARIANTS.search(content) if isinstance(content, str) else None
            if match:
                replies = json.loads(match.group(1))
                key = hashlib.sha256(content.encode()).hexdigest()
                with self._lock:
                    index = self._served[key]
                    self._served[key] += 1
                return replies[index % len(replies)]
        return {"content": "(no script)"}


_MARK = re.compile(r"\[\[score:(\d)\]\]")


def judge_policy(body: dict[str, Any]) -> dict[str, Any]:
    """Plays the judge for both versions' prompts: the ``[[score:N]]`` in the answer is the verdict."""
    prompt = body["messages"][-1]["content"]
    if "JUDGE-FAILS" in prompt:
        return {"content": "I will not grade this."}
    mark = _MARK.search(prompt)
    return {"content": json.dumps({"score": int(mark.group(1)) if mark else 0, "reasoning": "scripted"})}


@dataclass(frozen=True)
class Scenario:
    name: str
    env_file: str
    env_class: str
    rows: tuple[Any, ...]
    group_size: int = 1
    max_examples: int | str | None = None
    auth: str = "static"
    bind: dict[str, str] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    kept: dict[str, Any] | None = None
    """This project's summarized outcome where it differs from 0.2.5's on purpose (see docs/migrating.md)."""
    why_kept: str = ""

    def spec(self, data_dir: Path, base_url: str, judge_url: str) -> dict[str, Any]:
        data_dir.mkdir(parents=True, exist_ok=True)
        lines = [row if isinstance(row, str) else json.dumps(row) for row in self.rows]
        (data_dir / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        kwargs = {key: (judge_url if value == "{judge_url}" else value) for key, value in self.env_kwargs.items()}
        return {
            "kind": "env",
            "env_file": str(ENVS / self.env_file),
            "env_class": self.env_class,
            "env_kwargs": kwargs,
            "data_dir": str(data_dir),
            "split": "train",
            "group_size": self.group_size,
            "base_url": base_url,
            "max_examples": self.max_examples,
            "auth": self.auth,
            "bind": self.bind,
        }


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """What a scenario is compared on: where it failed, or per example the sorted sibling outcomes."""
    if "stage" in result:
        return {"stage": result["stage"], "error": result["error"]["type"]}
    groups = []
    for group in result["groups"]:
        if "stage" in group:
            groups.append({"stage": group["stage"], "error": group["error"]["type"]})
            continue
        outcomes = sorted(
            ((o["termination_reason"], {k: round(v, 9) for k, v in o["rewards"].items()}) for o in group["outcomes"]),
            key=lambda item: (item[0], json.dumps(item[1], sort_keys=True)),
        )
        groups.append([[reason, rewards] for reason, rewards in outcomes])
    return {"dataset_size": result["dataset_size"], "groups": groups}


MATH = "math_env.py"
GROUP = "math_group_env.py"
GEO = "geo3k_env.py"
COLOR = "dominant_color_env.py"
RAG = "rag_env.py"


def _math_row(question: str, answer: str = "42", **extra: Any) -> dict[str, Any]:
    return {"question": question, "answer": answer, **extra}


BUDGET_BODY = {
    "error": {
        "message": "request exceeds the token budget",
        "type": "invalid_request_error",
        "code": "context_budget_exceeded",
    }
}
Q = "What is 6 * 7?"
ZOOM = call("zoom", {"region": "angle ABC", "factor": 3}, "z1")
MEASURE_AB = call("measure", {"segment": "AB"}, "m1")
MEASURE_BC = call("measure", {"segment": "BC"}, "m2")
BOXED_5 = {"content": "The length is \\boxed{5}."}
RAG_ROW = {
    "question": "What is the capital of France?",
    "answer": "Paris",
    "reference_chunks": [{"content": "Paris is the capital of France.", "metadata": {"file": "docs/France.md"}}],
}
SEARCH_FRANCE = {"tool_calls": [call("search", {"query": "capital of France"}, "s1")]}


def answer_turn(answer: str) -> dict[str, str]:
    return {"content": f"<think>checked the atlas</think><answer>{answer}</answer>"}


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "math_single_turn",
        MATH,
        "MathEnv",
        (
            _math_row(ask(Q, {"content": "<answer>42</answer>\n"})),
            _math_row(ask(Q + " (bare)", {"content": "42\n"})),
            _math_row(ask(Q + " (wrong)", {"content": "<answer>41</answer>"})),
        ),
    ),
    Scenario(
        "math_finish_reasons",
        MATH,
        "MathEnv",
        (
            _math_row(ask(Q, {"content": "<answer>42", "finish_reason": "length"})),
            _math_row(ask(Q + " (filtered)", {"content": "<answer>42</answer>", "finish_reason": "content_filter"})),
            _math_row(ask(Q + " (budget)", {"status": 400, "body": BUDGET_BODY})),
            _math_row(ask(Q + " (bad request)", {"status": 400, "message": "unsupported parameter"})),
        ),
    ),
    Scenario(
        "math_openai_context_error",
        MATH,
        "MathEnv",
        (_math_row(ask(Q, {"error": "context"})),),
        kept={"dataset_size": 1, "groups": [[["context_exceeded", {"correct": 0.0, "unscored_before": 1.0}]]]},
        why_kept="OpenAI's context_length_exceeded is reported as context_exceeded (0.2.5: model_error)",
    ),
    Scenario(
        "math_reward_failure",
        MATH,
        "MathEnv",
        (
            _math_row(ask(Q, {"content": "<answer>42</answer>"}), mode="verifier_down"),
            _math_row(ask(Q + " (cut)", {"content": "<answer>42", "finish_reason": "length"}), mode="verifier_down"),
        ),
    ),
    Scenario(
        "math_repeated_rows",
        MATH,
        "MathEnv",
        (_math_row(ask(Q, {"content": "<answer>42</answer>"})),) * 2,
    ),
    Scenario(
        "math_role_only_prompt_message",
        MATH,
        "RawMathEnv",
        (
            {
                "prompt_messages": [
                    {"role": "system"},
                    {"role": "user", "content": ask(Q, {"content": "<answer>42</answer>"})},
                ],
                "answer": "42",
            },
        ),
    ),
    Scenario("math_row_to_example_error_type", MATH, "MathEnv", ({"question": "no answer field"},)),
    Scenario(
        "math_max_examples_zero",
        MATH,
        "MathEnv",
        (_math_row(ask(Q, {"content": "<answer>42</answer>"})),),
        max_examples=0,
    ),
    Scenario(
        "math_max_examples_one",
        MATH,
        "MathEnv",
        (_math_row(ask(Q, {"content": "<answer>42</answer>"})), _math_row(ask(Q + " (second)", {"content": "no"}))),
        max_examples=1,
    ),
    Scenario(
        "math_run_rollout_override",
        MATH,
        "WrappedMathEnv",
        (_math_row(ask(Q, {"content": "<answer>42</answer>"})),),
    ),
    Scenario(
        "math_custom_model_auth",
        MATH,
        "MathEnv",
        (_math_row(ask(Q, {"content": "<answer>42</answer>"})),),
        auth="custom",
    ),
    Scenario(
        "group_majority",
        GROUP,
        "MathGroupEnv",
        (
            _math_row(
                variants(
                    "2 + 2?",
                    {"content": "<answer>4</answer>"},
                    {"content": "<answer>4</answer>"},
                    {"content": "<answer>5</answer>"},
                ),
                "4",
            ),
            _math_row(
                variants(
                    "2 + 3?",
                    {"content": "<answer>5</answer>"},
                    {"status": 400, "message": "nope"},
                    {"content": "<answer>6</answer>"},
                ),
                "5",
            ),
        ),
        group_size=3,
    ),
    Scenario(
        "group_hook_failures",
        GROUP,
        "MathGroupEnv",
        (
            _math_row(variants("1 + 1? (drop)", {"content": "<answer>2</answer>"}), "2", mode="drop_one"),
            _math_row(
                variants(
                    "1 + 2? (raise)",
                    {"content": "<answer>3</answer>"},
                    {"content": "<answer>3", "finish_reason": "length"},
                ),
                "3",
                mode="raise",
            ),
            _math_row(
                variants(
                    "1 + 3? (judge)",
                    {"content": "<answer>4</answer>"},
                    {"content": "<answer>4", "finish_reason": "length"},
                ),
                "4",
                mode="judge_down",
            ),
            _math_row(variants("1 + 4? (empty)", {"content": "<answer>5</answer>"}), "5", mode="empty"),
        ),
        group_size=2,
    ),
    Scenario(
        "geo3k_tools",
        GEO,
        "Geo3kEnv",
        (
            {"question": "Find AB.", "answer": "5", "script": script({"tool_calls": [ZOOM]}, BOXED_5)},
            {
                "question": "Find BC.",
                "answer": "5",
                "script": script({"tool_calls": [MEASURE_AB, MEASURE_BC]}, BOXED_5),
            },
            {
                "question": "Rotate it.",
                "answer": "5",
                "script": script({"tool_calls": [call("rotate", {}, "r1")]}, BOXED_5),
            },
            {
                "question": "Bad JSON.",
                "answer": "5",
                "script": script({"tool_calls": [{"name": "zoom", "arguments": "{region: AB", "id": "b1"}]}, BOXED_5),
            },
            {
                "question": "Loose arguments.",
                "answer": "5",
                "script": script({"tool_calls": [call("zoom", {"region": "AB", "factor": "2"}, "l1")]}, BOXED_5),
            },
            {
                "question": "Extra argument.",
                "answer": "5",
                "script": script({"tool_calls": [call("measure", {"segment": "AB", "units": "cm"}, "e1")]}, BOXED_5),
            },
        ),
    ),
    Scenario(
        "geo3k_limits",
        GEO,
        "Geo3kEnv",
        (
            {
                "question": "Calls then length.",
                "answer": "5",
                "script": script({"tool_calls": [ZOOM], "finish_reason": "length"}, BOXED_5),
            },
            {"question": "Too many calls.", "answer": "5", "script": script({"tool_calls": [ZOOM, ZOOM, ZOOM, ZOOM]})},
            {
                "question": "Never stops.",
                "answer": "5",
                "script": script(*({"tool_calls": [call("zoom", {"region": f"r{i}"}, f"t{i}")]} for i in range(4))),
            },
            {
                "question": "Default run_tool.",
                "answer": "5",
                "script": script({"tool_calls": [call("hint", {}, "h1")]}, BOXED_5),
            },
            {
                "question": "Broken tool.",
                "answer": "5",
                "script": script({"tool_calls": [call("measure", {"segment": "explode"}, "x1")]}, BOXED_5),
            },
        ),
    ),
    Scenario(
        "dominant_color",
        COLOR,
        "DominantColorEnv",
        (
            {"color": "red", "script": script({"content": "Red\n"})},
            {"color": "blue", "script": script({"content": "green"})},
        ),
        max_examples="omit",
    ),
    *(
        Scenario(
            f"rag_{name}",
            RAG,
            "CapitalsRagEnv",
            (RAG_ROW,),
            env_kwargs={"judge_base_url": "{judge_url}", "script": script(*steps), **extra},
            bind=bind,
        )
        for name, steps, extra, bind in (
            ("grounded", (SEARCH_FRANCE, answer_turn("Paris [Source: France.md] [[score:1]]")), {}, None),
            ("judged_wrong", (SEARCH_FRANCE, answer_turn("Lyon [Source: France.md] [[score:0]]")), {}, None),
            ("from_memory", (answer_turn("Paris [Source: France.md] [[score:1]]"),), {}, None),
            ("no_answer_tag", (SEARCH_FRANCE, {"content": "Paris, surely. [[score:1]]"}), {}, None),
            ("judge_fails", (SEARCH_FRANCE, answer_turn("JUDGE-FAILS [Source: France.md]")), {}, None),
            (
                "injected_judge_auth",
                (SEARCH_FRANCE, answer_turn("Paris [Source: docs/France.md] [[score:1]]")),
                {"judge_token": None},
                {"judge": "sk-injected"},
            ),
        )
    ),
)
