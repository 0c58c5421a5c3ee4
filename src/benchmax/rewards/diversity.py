"""benchmax 0.2.x's module path ``benchmax.rewards.diversity``: its names, from where they live now."""

from benchmax.rewards._diversity import (
    ClusterResult,
    DiversityConfig,
    LLMDiversityConfig,
    NgramDiversityConfig,
    _jaccard,  # noqa: F401 (0.2.5's name, which its tests import)
    cluster_texts,
    scale_by_diversity,
)
from benchmax.rewards._diversity import _char_ngrams as _ngram_set  # noqa: F401 (0.2.5's name, which its tests import)

# 0.2.5 also exposed these names at this path (imported there); code may import them from it.
from benchmax.rewards._judge import Judge, JudgeError  # noqa: F401
from benchmax.rewards._prompts import DEFAULT_DIVERSITY_INSTRUCTIONS, build_diversity_prompt  # noqa: F401

__all__ = [
    "ClusterResult",
    "DiversityConfig",
    "LLMDiversityConfig",
    "NgramDiversityConfig",
    "cluster_texts",
    "scale_by_diversity",
]
