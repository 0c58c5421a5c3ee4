"""The root of every error benchmax raises on purpose, and the whole tree drawn once.

Each face catches :class:`BenchmaxError` once and prints its message: these
errors say what went wrong and what to do, so no traceback is needed. Anything
else that escapes is a bug, and keeps its traceback.

Every exception class in ``benchmax``, with the package it lives in (a second
base in brackets: ``except ValueError`` catches it too; ``benchmax.inspector.InspectorError``
is another name for ``AccessError``)::

    BenchmaxError (Exception)                                 benchmax.errors
    ├── AccessError (ValueError)                              benchmax.access
    ├── BundlingError                                         benchmax.bundle
    ├── CacheError                                            benchmax.client
    ├── DatasetError (ValueError)                             benchmax.envs
    │   ├── DatasetNotFound (FileNotFoundError)               benchmax.envs
    │   ├── DatasetRowTypeError (TypeError)                   benchmax.envs
    │   ├── EndlessDatasetError                               benchmax.envs
    │   ├── SftDatasetError                                   benchmax.sft
    │   └── UnknownLevelError                                 benchmax.envs
    ├── EmbeddedModelError (RuntimeError)                     benchmax.local
    ├── EnvDefinitionError (TypeError, ValueError)            benchmax.envs
    ├── EnvSpecError (ValueError)                             benchmax.envs
    │   └── MixError                                          benchmax.mix
    ├── IncompatibleRuntimeError                              benchmax.bundle
    │   ├── IncompatibleBenchmaxError                         benchmax.bundle
    │   └── IncompatiblePythonError                           benchmax.bundle
    ├── ModelAuthError (ValueError)                           benchmax.auth
    ├── ModelError                                            benchmax.client
    │   ├── EndpointDown                                      benchmax.client
    │   ├── EndpointError                                     benchmax.runner
    │   └── ModelNotServed                                    benchmax.client
    ├── ModelNotFound (FileNotFoundError)                     benchmax.train
    ├── PriceTableError (ValueError)                          benchmax.client
    ├── ProxyError                                            benchmax.proxy
    ├── ReplyTooLarge (ValueError)                            benchmax.bounded
    ├── RescoreRefused (ValueError)                           benchmax.runner
    ├── RolloutFailure (RuntimeError)                         benchmax.envs
    │   └── JudgeError                                        benchmax.rewards
    ├── RunStopped                                            benchmax.runner
    ├── SandboxError (RuntimeError)                           benchmax.sandbox
    │   ├── SandboxEnded                                      benchmax.sandbox
    │   └── SandboxUnavailable                                benchmax.sandbox
    ├── SchemaError (RuntimeError)                            benchmax.store
    ├── ServeError (ValueError)                               benchmax.serve
    ├── StoreError (RuntimeError)                             benchmax.store
    ├── StrictJsonError (ValueError)                          benchmax.sft
    ├── TelemetryError (ValueError)                           benchmax.telemetry
    ├── TemplateError (ValueError)                            benchmax.train
    ├── TraceFormatError (ValueError)                         benchmax.traces
    ├── TrainError (ValueError)                               benchmax.train
    │   └── CurriculumError                                   benchmax.train
    └── WireError (ValueError)                                benchmax.remote

Outside the root, on purpose: signals inside one mechanism, caught where they are
raised and turned into a :class:`BenchmaxError` or a rollout's failure before a user
sees them (``ToolError`` is 0.2.x's: a tool's failure, which the model reads)::

    BadRequest (Exception)                                    benchmax.proxy
    ContextFailed (Exception)                                 benchmax.serve
    InvalidRewards (ValueError)                               benchmax.engine
    MathVerifyUnavailable (RuntimeError)                      benchmax.rewards
    SessionError (Exception)                                  benchmax.serve
    TokenMismatch (ValueError)                                benchmax.train
    ToolError (Exception)                                     benchmax.envs
    Unavailable (Exception)                                   benchmax.client
    UncacheableRequest (ValueError)                           benchmax.client
    UnknownRun (LookupError)                                  benchmax.inspector
    UnscorableRollout (RuntimeError)                          benchmax.train
    _Died (Exception)                                         benchmax.local
    _GroupTimeout (Exception)                                 benchmax.engine
    _InvalidReply (ValueError)                                benchmax.rewards
    _Malformed (ValueError)                                   benchmax.engine
    _ProtocolError (ValueError)                               benchmax.sandbox
    _ReachedGenerate (Exception)                              benchmax.adapters
    _Refused (Exception)                                      benchmax.serve
    _Retryable (Exception)                                    benchmax.client
    _SolverNeedsModel (Exception)                             benchmax.adapters

``tests/test_errors.py`` keeps this drawing true: a class added, moved or re-parented
anywhere in ``src/benchmax`` fails it until it is drawn here.
"""

from __future__ import annotations


class BenchmaxError(Exception):
    """An error whose message tells the user what to change."""


__all__ = ["BenchmaxError"]
