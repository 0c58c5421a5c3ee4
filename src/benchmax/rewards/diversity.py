"""benchmax 0.2.x's module path ``benchmax.rewards.diversity``: its names, from where they live now."""

from benchmax.rewards._diversity import (
    ClusterResult,
    DiversityConfig,
    LLMDiversityConfig,
    NgramDiversityConfig,
    cluster_texts,
    scale_by_diversity,
)

__all__ = [
    "ClusterResult",
    "DiversityConfig",
    "LLMDiversityConfig",
    "NgramDiversityConfig",
    "cluster_texts",
    "scale_by_diversity",
]
