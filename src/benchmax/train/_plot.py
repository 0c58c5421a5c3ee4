"""The reward curve of a run, as a PNG beside its store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def reward_curve(history: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path | None:
    """Plot mean reward per step (and each component's mean) from TRL's log history.

    Returns the file written, or ``None`` when no step logged a reward yet.
    """
    points = [(entry["step"], entry) for entry in history if "reward" in entry and "step" in entry]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    steps = [step for step, _ in points]
    figure, axes = pyplot.subplots(figsize=(7, 4), dpi=100)
    axes.plot(steps, [entry["reward"] for _, entry in points], label="reward (weighted sum)", linewidth=2)
    components = sorted(
        {key for _, entry in points for key in entry if key.startswith("rewards/") and key.endswith("/mean")}
    )
    for key in components:
        values = [(step, entry[key]) for step, entry in points if key in entry]
        axes.plot(
            [step for step, _ in values],
            [value for _, value in values],
            label=key.removeprefix("rewards/").removesuffix("/mean"),
            linewidth=1,
            alpha=0.7,
        )
    axes.set_xlabel("training step")
    axes.set_ylabel("mean reward")
    axes.set_title(title or "benchmax train")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    pyplot.close(figure)
    return path
