"""What a server says it serves (``GET /models``), and which model name a run sends it.

One reading of ``/models`` for every face: the eval preflight, the replicas'
preflight and the trainer's vLLM policy all parse it here, and the name a run
sends is chosen by one rule, :func:`choose_model`:

- a name the server lists is used as given;
- so is an *alias* of a listed name: the listed name is the given one followed
  by a version (``-``, ``:`` or ``@`` and a digit: ``gpt-4o`` for
  ``gpt-4o-2024-08-06``, ``llama3`` for ``llama3:8b``) or by ``latest``
  (``llama3`` for ``llama3:latest``); a given name ending in ``-latest`` or
  ``:latest`` is read without it. Hosted APIs answer to such aliases while
  listing only some of them, so a real name is not refused;
- any other name is refused before a rollout is spent, with the names served
  (``check=False``, the CLI's ``--no-model-check``, sends it anyway: for a
  gateway whose list is partial);
- no name given: the one model the server lists; a server that lists several
  must be told which; one that lists none (no ``/models`` route) gets
  ``default``.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from benchmax.client._types import ModelError
from benchmax.envs import TerminationReason

UNNAMED = "default"
"""The model name sent when none is given and the server lists none."""

_VERSION = re.compile(r"[-:@](?:\d|latest$)")
_LATEST = re.compile(r"[-:]latest$")
_SHOWN = 8


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One entry of ``GET /models``."""

    id: str
    max_model_len: int | None = None
    """The context length, where the server says it (vLLM does)."""


class ModelNotServed(ModelError):
    """The model name asked for is not one the server serves (or none was given and it serves several).

    A usage error: the run is refused before anything is stored (the CLI exits 2);
    a rollout that meets it (a trainer's policy) ends ``model_error``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(TerminationReason.MODEL_ERROR, message)


def parse_models(data: Any) -> tuple[ServedModel, ...] | None:
    """The models in a ``/models`` reply (parsed JSON); ``None`` when it is not a model list at all."""
    items = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        return None
    served = []
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("id"), str):
            length = item.get("max_model_len")
            valid = isinstance(length, int) and not isinstance(length, bool) and length > 0
            served.append(ServedModel(item["id"], length if valid else None))
    return tuple(served)


def parse_models_body(raw: bytes) -> tuple[ServedModel, ...] | None:
    """:func:`parse_models` of a raw body; ``None`` for one that is not JSON (an HTML page)."""
    try:
        return parse_models(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return None


def choose_model(requested: str | None, served: Mapping[str, Sequence[str]], *, check: bool = True) -> str:
    """The model name to send, by the rule in the module docstring.

    ``served`` maps each server (a replica) to the ids it lists (empty: it
    lists none, so it cannot be checked). Raises :class:`ModelNotServed`.
    """
    listing = {url: list(ids) for url, ids in served.items() if ids}
    if requested is not None:
        if check:
            for url, ids in listing.items():
                if not _serves(requested, ids):
                    raise ModelNotServed(
                        f"--model {requested}: {url} does not serve it; it serves {_names(ids)}. "
                        "Give one of those, or --no-model-check to send the name anyway "
                        "(for a gateway whose /models list is partial)"
                    )
        return requested
    if not listing:
        return UNNAMED
    url, ids = next(iter(listing.items()))
    if len(ids) > 1:
        raise ModelNotServed(f"{url} serves {len(ids)} models ({_names(ids)}); choose one with --model")
    differ = {other: names for other, names in listing.items() if names != ids}
    if differ:
        said = "; ".join(f"{other}: {_names(names)}" for other, names in {url: ids, **differ}.items())
        raise ModelNotServed(f"the replicas serve different models ({said}); choose one with --model")
    return ids[0]


def _serves(requested: str, ids: Sequence[str]) -> bool:
    stem = _LATEST.sub("", requested)
    for name in ids:
        if name in (requested, stem):
            return True
        if name.startswith(stem) and _VERSION.match(name, len(stem)):
            return True
    return False


def _names(ids: Sequence[str]) -> str:
    return ", ".join(ids[:_SHOWN]) + (f", ... ({len(ids)} in all)" if len(ids) > _SHOWN else "")


def lists_models(host: str, port: int, *, timeout: float = 1.0) -> bool:
    """Whether a server starting on ``host:port`` is ready: ``GET /v1/models`` answers 200.

    The readiness check of a model server a process of ours launched (the embedded
    llama.cpp server, the scripted test server), blocking and without retries: the
    caller polls it until its own deadline. Unlike ``HttpClient.probe`` (is a known
    endpoint up at all), only a model list counts as ready.
    """
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", "/v1/models")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
