"""Small envs written into a test's directory, each with its own data: the members of test mixtures.

Each env answers by its prompt's ``#answers`` line (``runkit.answers_policy`` on the scripted
server) and scores one component; ``trace`` (a file) records which example id each reward
hook saw and each ``aclose``.
"""

from __future__ import annotations

import json
from pathlib import Path

ENV_CODE = '''
import json
from pathlib import Path

from benchmax.envs import BaseEnv, JsonlDataset


class {cls}(BaseEnv):
    max_turns = 1

    def __init__(self, trace=None, fail_close=False, **kwargs):
        super().__init__(**kwargs)
        self.trace = trace
        self.fail_close = fail_close

    def _note(self, *parts):
        if self.trace:
            with open(self.trace, "a") as out:
                out.write(json.dumps(["{name}", *parts]) + "\\n")

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return JsonlDataset(Path(base_dir) / f"{{split}}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout):
        self._note("reward", rollout.example_id, rollout.example_args["answer"])
        text = rollout.messages[-1]["content"] or ""
        return {{"{component}": float(text.strip() == rollout.example_args["answer"])}}

    async def aclose(self):
        self._note("aclose")
        if self.fail_close:
            raise RuntimeError("{name} would not close")
'''


def row(answer: str, text: str, sleep: float | None = None) -> dict[str, object]:
    content = f"{text}\n#answers: {json.dumps([answer])}" + (f"\n#sleep: {sleep}" if sleep else "")
    return {"prompt_messages": [{"role": "user", "content": content}], "answer": answer}


def write_env(
    root: Path,
    name: str,
    *,
    rows: int = 3,
    component: str = "correct",
    train_rows: int | None = None,
    sleep: float | None = None,
) -> Path:
    """``root/NAME/env.py`` (class ``<Name>Env``) with ``rows`` eval and ``train_rows`` train lines."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    cls = name.capitalize() + "Env"
    (directory / "env.py").write_text(ENV_CODE.format(cls=cls, name=name, component=component))
    for split, count in (("eval", rows), ("train", rows if train_rows is None else train_rows)):
        lines = [json.dumps(row(f"{name}{index}", f"{name} question {index}", sleep)) for index in range(count)]
        (directory / f"{split}.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory
