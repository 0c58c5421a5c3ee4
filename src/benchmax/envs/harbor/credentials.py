"""benchmax 0.2.x's module path ``benchmax.envs.harbor.credentials``: its names, from where they live now."""

from benchmax.envs.harbor._credentials import (
    CustomSandboxCredentials,
    DaytonaCredentials,
    ModalCredentials,
    SandboxCredentials,
    sandbox_credentials_scope,  # noqa: F401 (0.2.5 defined it here, outside __all__)
)

__all__ = [
    "CustomSandboxCredentials",
    "DaytonaCredentials",
    "ModalCredentials",
    "SandboxCredentials",
]
