"""benchmax 0.2.x's module path ``benchmax.envs.harbor.bundled_agent``: its names, from where they live now."""

from benchmax.envs.harbor._bundled_agent import BundledAgentSource, BundledHarborAgent

__all__ = ["BundledAgentSource", "BundledHarborAgent"]
