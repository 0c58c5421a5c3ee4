"""The reward curve of a run, as a PNG beside its store."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmax.train._envs import envs_from_logs


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
    for env, values in _env_series(points, "reward").items():
        axes.plot(
            [step for step, _ in values],
            [value for _, value in values],
            label=f"{env} (env reward)",
            linewidth=1.5,
            linestyle="--",
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


def component_curves(history: Sequence[Mapping[str, Any]], directory: Path, *, title: str = "") -> list[Path]:
    """One image per reward component (the mean of everything the step generated,
    and of what it trained on), plus the dead-group share and the IS ratio / KL.

    Returns the files written; nothing when no step logged a reward yet.
    """
    points = [entry for entry in history if "reward" in entry and "step" in entry]
    if not points:
        return []
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    names = sorted(
        {key[len("rewards/") : -len("/mean")] for entry in points for key in entry if _component_key(key)}
    )
    plots: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("reward", "mean reward", [("generated/reward", "all rollouts drawn"), ("reward", "rollouts trained on")])
    ]
    for name in names:
        plots.append(
            (
                name,
                f"mean {name}",
                [(f"generated/{name}", "all rollouts drawn"), (f"rewards/{name}/mean", "rollouts trained on")],
            )
        )
    plots.append(("dead_groups", "share of groups", [("groups/dead_share", "dead groups (all siblings equal)")]))
    plots.append(
        (
            "is_kl",
            "ratio / KL",
            [
                ("is_ratio/mean", "IS ratio mean"),
                ("is_ratio/min", "IS ratio min"),
                ("is_ratio/max", "IS ratio max"),
                ("kl/sampler", "KL(sampler || policy)"),
                ("kl", "KL(policy || reference)"),
            ],
        )
    )
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, ylabel, series in plots:
        lines = [
            (label, [(entry["step"], entry[key]) for entry in points if _finite(entry.get(key))])
            for key, label in series
        ]
        lines = [(label, values) for label, values in lines if values]
        if not lines:
            continue
        figure, axes = pyplot.subplots(figsize=(6, 3.5), dpi=100)
        for label, values in lines:
            axes.plot([step for step, _ in values], [value for _, value in values], label=label, marker=".")
        axes.set_xlabel("training step")
        axes.set_ylabel(ylabel)
        axes.set_title(f"{stem} · {title}" if title else stem, fontsize=9)
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize=8)
        figure.tight_layout()
        path = directory / f"{stem}.png"
        figure.savefig(path)
        pyplot.close(figure)
        written.append(path)
    return written


def _component_key(key: str) -> bool:
    return key.startswith("rewards/") and key.endswith("/mean")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def env_curves(history: Sequence[Mapping[str, Any]], directory: Path, *, title: str = "") -> list[Path]:
    """In a mixture, ``envs.png``: each env's reward per step and its dead groups per step.

    Returns the file written; nothing for a run of one env (no per-env figures logged).
    """
    points = [(entry["step"], entry) for entry in history if "reward" in entry and "step" in entry]
    rewards = _env_series(points, "reward")
    if not rewards:
        return []
    dead = _env_series(points, "groups_dead")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(7, 5.5), dpi=100, sharex=True)
    for env, values in rewards.items():
        top.plot([step for step, _ in values], [value for _, value in values], label=env, marker=".")
    for env, values in dead.items():
        bottom.plot([step for step, _ in values], [value for _, value in values], label=env, marker=".")
    top.set_ylabel("mean reward")
    top.set_title(f"reward per env · {title}" if title else "reward per env", fontsize=9)
    bottom.set_ylabel("dead groups")
    bottom.set_xlabel("training step")
    for axes in (top, bottom):
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "envs.png"
    figure.savefig(path)
    pyplot.close(figure)
    return [path]


def _env_series(points: Sequence[tuple[Any, Mapping[str, Any]]], figure: str) -> dict[str, list[tuple[Any, float]]]:
    """``{env: [(step, value)]}`` of one per-env figure (``reward``, ``groups_dead``) over the steps."""
    series: dict[str, list[tuple[Any, float]]] = {}
    for step, entry in points:
        for env in envs_from_logs(entry):
            value = getattr(env, figure)
            if value is not None:
                series.setdefault(env.env, []).append((step, float(value)))
    return dict(sorted(series.items()))
