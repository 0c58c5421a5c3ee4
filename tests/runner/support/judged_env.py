"""A multi-turn env with a tool and an LLM-judge reward, for the cache and cost tests.

Each prompt scripts the policy's turns (a ``#script`` line: a tool call, then an
answer); the tool ``lookup`` answers deterministically; ``compute_reward`` asks a
judge (model ``judge_model`` at ``judge_url``) for ``{"score": ...}`` and also
checks the answer itself, so a run makes policy calls, tool calls and judge calls.
"""

from __future__ import annotations

from benchmax.envs import BaseEnv, JsonlDataset
from benchmax.rewards import Judge, extract_completion_text


class JudgedEnv(BaseEnv):
    max_turns = 3

    def __init__(self, judge_url: str, judge_model: str = "judge") -> None:
        super().__init__()
        self.judge = Judge(model=judge_model, base_url=judge_url, max_retries=0)

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def list_tools(self):
        return [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look a word up.",
                    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
                },
            }
        ]

    async def run_tool(self, rollout_id, tool_name, **tool_args):
        return f"{tool_args['word']} means {len(tool_args['word'])}"

    async def compute_reward(self, rollout):
        answer = extract_completion_text(rollout.messages).strip()
        payload, _ = await self.judge.request_json(
            f'Is "{answer}" right? Answer with JSON: {{"score": 0 or 1}}', request_id="grade"
        )
        return {"judge": float(payload["score"]), "correct": float(answer == rollout.example_args["answer"])}

    async def aclose(self):
        await self.judge.aclose()
