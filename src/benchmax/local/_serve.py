"""Child-process entry point: llama-cpp-python's OpenAI server on an inherited socket.

Run by :class:`benchmax.local.EmbeddedModel`, not by hand. Compared with
``python -m llama_cpp.server`` it (1) serves on a socket the parent already
bound, so there is no window in which another process can take the port;
(2) ignores llama-cpp-python's settings environment variables (``API_KEY``,
``PORT``, ``MODEL``...), which would otherwise silently change the server;
(3) exits when its parent dies, so a ``kill -9`` of a benchmax run cannot
leave a model server behind; and (4) serves the ``chatml-function-calling``
chat format with the OpenAI behaviours it lacks (see :func:`_openai_tool_calling`),
its prompt rendered without HTML escaping (see :func:`_install_raw_templates`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

from benchmax.local._server import CRASH_DRILLS, SYSTEM_INFO_PREFIX

CHAT_FORMAT = "benchmax-chatml-function-calling"
_WATCH_INTERVAL = 0.5


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    _exit_with_parent(args.parent_pid)
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    _drop_settings_env(ServerSettings, ModelSettings)
    import uvicorn
    from llama_cpp.llama_chat_format import register_chat_completion_handler
    from llama_cpp.server.app import create_app

    register_chat_completion_handler(CHAT_FORMAT)(
        functools.partial(_openai_tool_calling, default_max_tokens=args.default_max_tokens)
    )
    if args.no_extra_buffers:
        _disable_extra_buffer_types()

    import llama_cpp

    system_info = llama_cpp.llama_print_system_info().decode(errors="replace").strip()
    print(f"{SYSTEM_INFO_PREFIX}{system_info}", file=sys.stderr)
    print(
        f"benchmax: loading {args.model} as {args.alias!r} "
        f"(n_ctx={args.n_ctx}, n_threads={args.n_threads}, chat_format={CHAT_FORMAT}, "
        f"default max_tokens={args.default_max_tokens}, "
        f"extra buffer types {'off' if args.no_extra_buffers else 'on'})",
        file=sys.stderr,
        flush=True,
    )
    listener = socket.socket(fileno=args.fd)
    host, port = listener.getsockname()[:2]
    app = create_app(
        server_settings=ServerSettings(host=host, port=port),
        model_settings=[
            ModelSettings(
                model=args.model,
                model_alias=args.alias,
                chat_format=CHAT_FORMAT,
                n_ctx=args.n_ctx,
                n_threads=args.n_threads,
                n_threads_batch=args.n_threads,
                cache=args.prompt_cache > 0,
                cache_type="ram",
                cache_size=max(args.prompt_cache, 1),
                verbose=False,
            )
        ],
    )
    app = _NullContentAsEmpty(app)
    if args.crash is not None:
        app = _CrashDrill(app, args.crash, plain=args.no_extra_buffers)
    config = uvicorn.Config(app, host=host, port=port, timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[listener])


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmax.local._serve")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--n-threads", type=int, required=True)
    parser.add_argument("--default-max-tokens", type=int, required=True)
    parser.add_argument("--prompt-cache", type=int, default=0, help="bytes; 0 disables it")
    parser.add_argument("--fd", type=int, required=True, help="an inherited, bound socket")
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument(
        "--no-extra-buffers",
        action="store_true",
        help="load weights without llama.cpp's extra buffer types (AMX and repacked kernels)",
    )
    parser.add_argument("--crash", choices=CRASH_DRILLS, help="reliability drill: die by SIGSEGV on chat requests")
    return parser.parse_args(argv)


class _NullContentAsEmpty:
    """ASGI middleware: an assistant message's ``content: null`` reaches the server as ``""``.

    OpenAI's assistant turns with tool calls carry ``content: null`` (benchmax keeps
    them so, as 0.2.x does); llama-cpp-python's request model refuses it (HTTP 500,
    "7 validation errors"). The body is rewritten before its validation runs.
    """

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("path") != "/v1/chat/completions":
            await self._app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = _without_null_content(b"".join(chunks))
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app({**scope, "headers": headers}, replay, send)


def _without_null_content(raw: bytes) -> bytes:
    try:
        data = json.loads(raw)
    except ValueError:
        return raw
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return raw
    changed = False
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content") is None:
            message["content"] = ""
            changed = True
    return json.dumps(data).encode() if changed else raw


class _CrashDrill:
    """ASGI middleware that kills the server by SIGSEGV on chosen chat requests."""

    def __init__(self, app: Any, drill: str, *, plain: bool) -> None:
        self._app = app
        self._drill = drill
        self._plain = plain
        self._chats = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("path") == "/v1/chat/completions":
            self._chats += 1
            crash = {
                "every-chat": True,
                "unless-plain": not self._plain,
                "third-chat": self._chats == 3,
            }[self._drill]
            if crash:
                print(f"benchmax: crash drill {self._drill!r}: SIGSEGV on chat request {self._chats}", file=sys.stderr)
                sys.stderr.flush()
                os.kill(os.getpid(), signal.SIGSEGV)
        await self._app(scope, receive, send)


def _disable_extra_buffer_types() -> None:
    """Load the weights into plain CPU buffers, bypassing llama.cpp's AMX and repack kernels.

    A build tuned to its build machine (``GGML_NATIVE``, llama-cpp-python's default)
    compiles AMX tile kernels when that machine has AMX. Some virtual machines
    advertise AMX without running it: the first ``tilezero`` of a batched prompt
    raises SIGILL (seen in a Firecracker guest) or SIGSEGV, while 1-token prompts,
    which take the vector path, work. Those kernels are reached only through the
    "extra buffer types" the weights are loaded into; llama-cpp-python does not
    expose the model parameter that turns them off, so its defaults are patched.
    """
    import llama_cpp.llama_cpp as bindings

    defaults = bindings.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = without_extra_buffers


def _openai_tool_calling(llama: Any, *, default_max_tokens: int, **request: Any) -> Any:
    """llama-cpp-python's ``chatml-function-calling`` handler, made to follow OpenAI.

    Measured on 0.3.36: (a) with ``tools`` but no ``tool_choice`` it drops the
    tools, where OpenAI's default is ``"auto"``; (b) under ``"auto"`` it
    generates the tool arguments and the plain answer with no token limit, so a
    135M model that never closes a JSON string runs to the end of the context
    window (minutes per request on a 2-core machine); (c) its prompt template
    has no case for ``tool`` messages, so the model never sees a tool's result
    and calls the same tool again until ``max_turns``. Here (a) defaults to
    ``"auto"``, (b) caps every inner generation at the request's ``max_tokens``
    (``default_max_tokens`` when the request sets none) and (c) passes each tool
    result as a user turn naming the function.
    """
    from llama_cpp.llama_chat_format import chatml_function_calling

    _install_raw_templates()
    request["messages"] = _tool_results_as_user_turns(request.get("messages") or [])
    if request.get("tools") and request.get("tool_choice") is None:
        request["tool_choice"] = "auto"
    if request.get("max_tokens") is None:
        request["max_tokens"] = default_max_tokens
    return chatml_function_calling(llama=_TokenCap(llama, request["max_tokens"]), **request)


def _install_raw_templates() -> None:
    """Render ``chatml-function-calling``'s prompt as a model's tokenizer config would: no HTML escaping.

    llama-cpp-python 0.3.36 builds that handler's template with
    ``select_autoescape(["html", "xml"])``, which escapes every string rendered
    from a template string: from the second turn on the model read its own tool
    arguments as ``{&#34;text&#34;: ...}``, and tool results and user text with
    ``&amp;``/``&lt;``, and copied the escapes into its next calls. Chat templates
    are plain text (Hugging Face renders them with autoescape off and ``tojson``
    as ``json.dumps(..., ensure_ascii=False)``), so the handler's module is given a
    sandboxed environment that renders them so. The handler constructs its
    environment on each call, by the module's global name; the other handlers
    of that module already render with autoescape off. Idempotent.
    """
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from llama_cpp import llama_chat_format

    if getattr(llama_chat_format.ImmutableSandboxedEnvironment, "renders_raw", False):
        return

    class RawTemplates(ImmutableSandboxedEnvironment):
        """A sandboxed Jinja environment that never escapes: chat templates render text, not HTML."""

        renders_raw = True

        def __init__(self, *args: Any, **options: Any) -> None:
            options["autoescape"] = False
            super().__init__(*args, **options)
            self.filters["tojson"] = _tojson

    llama_chat_format.ImmutableSandboxedEnvironment = RawTemplates


def _tojson(value: Any, indent: int | None = None, **options: Any) -> str:
    """``tojson`` as Hugging Face chat templates have it: plain JSON with non-ASCII kept.

    Jinja's own ``tojson`` writes ``<``, ``>``, ``&`` and ``'`` as ``\\u003c``... for HTML.
    """
    return json.dumps(value, ensure_ascii=False, indent=indent, **options)


def _tool_results_as_user_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names: dict[Any, str] = {}
    result = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[call.get("id")] = str(function.get("name") or "tool")

        elif role == "tool":
            name = names.get(message.get("tool_call_id"), "tool")
            content = _text(message.get("content"))
            message = {"role": "user", "content": f"functions.{name} returned:\n{content}"}
        result.append(message)
    return result


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


class _TokenCap:
    """A ``Llama`` whose completions default to at most ``max_tokens`` tokens."""

    def __init__(self, llama: Any, max_tokens: int) -> None:
        self._llama = llama
        self._max_tokens = max_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("max_tokens") is None:
            kwargs["max_tokens"] = self._max_tokens
        prompt = kwargs.get("prompt")
        if isinstance(prompt, str):
            _log_prompt_reuse(self._llama, prompt)
        return self._llama.create_completion(*args, **kwargs)


PROMPT_LOG_PREFIX = "benchmax: prompt tokens "
"""How the child logs each completion's prompt: ``benchmax: prompt tokens N, in the KV cache M``."""


def _log_prompt_reuse(llama: Any, prompt: str) -> None:
    """Log how much of ``prompt`` llama.cpp's KV cache already holds (what it need not evaluate).

    The state left by the last completion is reused up to the longest common
    prefix (``Llama.generate``); the rest is evaluated. This line is how the
    scheduling of a rollout's turns (``HttpModelClient.keep_turns_together``)
    is measured.
    """
    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    held = list(llama.input_ids[: llama.n_tokens])
    if held and tokens and held[0] != tokens[0] and held[0] == llama.token_bos():
        held = held[1:]  # the BOS llama.cpp put before the last prompt
    reused = 0
    for a, b in zip(held, tokens, strict=False):
        if a != b:
            break
        reused += 1
    print(f"{PROMPT_LOG_PREFIX}{len(tokens)}, in the KV cache {reused}", file=sys.stderr, flush=True)


def _exit_with_parent(parent_pid: int) -> None:
    """Exit as soon as the parent is gone (polling works on every POSIX system)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_WATCH_INTERVAL)
        os._exit(0)

    if os.getppid() != parent_pid:
        os._exit(0)
    threading.Thread(target=watch, name="benchmax-parent-watch", daemon=True).start()


def _drop_settings_env(*settings: type) -> None:
    names = {name.lower() for cls in settings for name in cls.model_fields}
    names.update({"config_file", "host", "port"})
    for key in list(os.environ):
        if key.lower() in names:
            del os.environ[key]


if __name__ == "__main__":
    main()
