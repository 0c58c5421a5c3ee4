"""The one readiness check of a launched model server (the embedded llama.cpp server and the
scripted test process both wait on it): only a model list at ``GET /v1/models`` is ready."""

from __future__ import annotations

import socket

import pytest

from benchmax.client import lists_models
from benchmax.testing import ScriptedServer


@pytest.mark.parametrize(
    ("options", "ready"),
    [({}, True), ({"models": None}, False), ({"models_status": 404}, False), ({"models_status": 503}, False)],
    ids=["lists", "no-route", "404-page", "503-page"],
)
def test_only_a_model_list_is_ready(options, ready):
    with ScriptedServer(**options) as server:
        assert lists_models(server.host, server.port) is ready


def test_nothing_listening_is_not_ready():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    assert lists_models("127.0.0.1", port, timeout=0.5) is False
