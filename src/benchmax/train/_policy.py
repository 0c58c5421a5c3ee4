"""Token-faithful model clients for training: the policy answers the engine's turns.

The engine talks to a policy exactly as to an HTTP server (each implements
:class:`~benchmax.engine.client.ModelClient`), so env code runs unchanged; the
trainer registers it for a base URL with ``ClientPool.register``. Every turn
returns its exact token ids and their logprobs. :class:`InProcessPolicy` runs
the trainer's own transformers model (turns that arrive within a few
milliseconds share one padded ``generate``); ``benchmax.train.vllm`` holds the
vLLM backends.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import torch

from benchmax.client import ChatResult, ModelError
from benchmax.envs import TerminationReason, Usage, message_key
from benchmax.telemetry import traced_model_call
from benchmax.train._sampling import Generation, GenerationRequest, sample
from benchmax.train._tokens import TemplateError, parse_tool_call_text, render_prompt, render_suffix

logger = logging.getLogger("benchmax.train.policy")


@dataclass(slots=True)
class TokenState:
    """What one sequence of a rollout has fed the model so far, as ids, never re-rendered."""

    ids: list[int]
    messages_seen: int
    """How many chat messages (prompt, completions, tool results) ``ids`` covers."""
    keys: tuple[tuple[Any, ...], ...] = ()
    """The :func:`~benchmax.envs.message_key` of each of those messages: the calls it continues."""


@dataclass(frozen=True, slots=True)
class GenerationRecord:
    """One sequence's generate call, as the model saw it (kept when ``record=True``)."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]


class TokenPolicy:
    """A chat ``ModelClient`` over a token-in/token-out generator.

    The engine speaks chat messages; training needs the exact ids the model saw
    and produced. A rollout's first turn is rendered once with the chat template,
    and each later turn appends only the new messages' ids to what the model
    already saw, so nothing is ever re-rendered. Backends (transformers
    in-process, vLLM colocated or served) implement :meth:`generate`.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        default_max_tokens: int = 256,
        max_context: int | None = None,
        record: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.default_max_tokens = default_max_tokens
        self.max_context = max_context
        self.record = record
        self.records: list[GenerationRecord] = []
        self.version: int | None = None
        """The trainer's policy version now generating (its step when the weights were
        last synced); every turn records the version that generated it."""
        self._states: dict[str, list[TokenState]] = {}
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    async def generate(self, request: GenerationRequest) -> Generation:
        raise NotImplementedError

    async def context_limit(self) -> int | None:
        """The longest prompt plus completion the backend accepts, if known."""
        return self.max_context

    # -- token state ---------------------------------------------------------

    def state(self, rollout_id: str) -> TokenState | None:
        """The rollout's most recently extended sequence's state."""
        states = self._states.get(rollout_id)
        return states[-1] if states else None

    def release(self, rollout_ids: Sequence[str]) -> None:
        """Forget finished rollouts' token state."""
        for rollout_id in rollout_ids:
            self._states.pop(rollout_id, None)

    def prompt_ids(self, body: Mapping[str, Any], rollout_id: str | None) -> list[int]:
        """The ids this turn feeds the model: rendered once, then extended by suffixes."""
        return self._prompt(body, rollout_id, _keys(body))[0]

    def _prompt(
        self, body: Mapping[str, Any], rollout_id: str | None, keys: tuple[tuple[Any, ...], ...]
    ) -> tuple[list[int], TokenState | None]:
        """The turn's ids and the sequence state they extend (``None``: rendered fresh). A rollout
        may hold several sequences (an agent's sub-agent): a call extends the most recently extended
        state whose messages (its completion's included) start the call's, by ``message_key`` as an
        agent's calls are split into sequences; one that continues none starts a sequence."""
        messages = list(body.get("messages") or [])
        tools = body.get("tools")
        states = self._states.get(rollout_id, ()) if rollout_id is not None else ()
        for state in reversed(states):
            seen = len(state.keys)
            if seen < len(keys) and keys[:seen] == state.keys:
                history, new = messages[:seen], messages[seen:]
                return state.ids + render_suffix(self.tokenizer, history, new, tools), state
        return render_prompt(self.tokenizer, messages, tools), None

    # -- ModelClient ---------------------------------------------------------

    async def chat(self, body: dict[str, Any], *, rollout_id: str | None = None) -> ChatResult:
        """A turn of the policy: a ``chat`` span without server attributes while tracing is on."""
        return await traced_model_call(body, None, None, lambda: self._chat(body, rollout_id))

    async def _chat(self, body: dict[str, Any], rollout_id: str | None) -> ChatResult:
        keys = _keys(body)
        try:
            prompt_ids, extended = self._prompt(body, rollout_id, keys)
        except TemplateError as exc:
            raise ModelError(TerminationReason.MODEL_ERROR, str(exc)) from None
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or self.default_max_tokens)
        limit = await self.context_limit()
        if limit is not None and len(prompt_ids) + 1 > limit:
            raise ModelError(
                TerminationReason.CONTEXT_EXCEEDED,
                f"prompt of {len(prompt_ids)} tokens exceeds the model's context of {limit}",
            )
        if limit is not None:
            max_tokens = min(max_tokens, limit - len(prompt_ids))
        temperature = body.get("temperature")
        top_p = body.get("top_p")
        generation = await self.generate(
            GenerationRequest(
                prompt_ids,
                max(1, max_tokens),
                1.0 if temperature is None else float(temperature),
                1.0 if top_p is None else float(top_p),
            )
        )
        completion = list(generation.ids)
        if self.record:
            self.records.append(GenerationRecord(tuple(prompt_ids), generation.ids))
        text = self.tokenizer.decode(completion, skip_special_tokens=True)
        content, calls = parse_tool_call_text(text)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        if rollout_id is not None:
            states = [state for state in self._states.get(rollout_id, ()) if state is not extended]
            self._states[rollout_id] = states
            states.append(TokenState(prompt_ids + completion, len(keys) + 1, (*keys, message_key(message))))
        return ChatResult(
            message=message,
            finish_reason=("tool_calls" if calls else "stop") if generation.finished else "length",
            usage=Usage(len(prompt_ids), len(completion)),
            prompt_token_ids=tuple(prompt_ids),
            completion_token_ids=generation.ids,
            completion_logprobs=generation.logprobs,
            policy_version=generation.version if generation.version is not None else self.version,
        )

    async def aclose(self) -> None:
        """Nothing to release per loop; backends with connections override this."""

    def close(self) -> None:
        """Release threads; called once, when training ends."""


def _keys(body: Mapping[str, Any]) -> tuple[tuple[Any, ...], ...]:
    return tuple(message_key(message) for message in body.get("messages") or ())


@dataclass(slots=True)
class _Pending:
    request: GenerationRequest
    future: asyncio.Future[Generation]


class Batcher:
    """Gathers turns that arrive within ``window`` seconds into one blocking
    ``generate`` call on a worker thread, so concurrent rollouts share a batch
    while the event loop stays free. Turns that arrive during a batch join the next.
    Batches hold one sampling setting each (``generate`` takes one)."""

    def __init__(
        self,
        generate: Callable[[Sequence[GenerationRequest]], list[Generation]],
        *,
        window: float = 0.005,
        max_batch: int = 64,
        name: str = "benchmax-generate",
    ) -> None:
        self._generate = generate
        self.window = window
        self.max_batch = max_batch
        self._name = name
        self._queue: list[_Pending] = []
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)

    async def submit(self, request: GenerationRequest) -> Generation:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            self._loop = loop
            self._queue = []
            self._wakeup = asyncio.Event()
            self._worker = loop.create_task(self._run(), name=f"{self._name}-batcher")
        future: asyncio.Future[Generation] = loop.create_future()
        self._queue.append(_Pending(request, future))
        assert self._wakeup is not None
        self._wakeup.set()
        return await future

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    async def _run(self) -> None:
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            await asyncio.sleep(self.window)
            self._wakeup.clear()
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            if self._queue:
                self._wakeup.set()
            batch = [item for item in batch if not item.future.done()]
            if not batch:
                continue
            groups: dict[tuple[float, float], list[_Pending]] = {}
            for item in batch:
                groups.setdefault((item.request.temperature, item.request.top_p), []).append(item)
            for items in groups.values():
                requests = [item.request for item in items]
                try:
                    results = await loop.run_in_executor(self._executor, self._generate, requests)
                except Exception as exc:
                    logger.exception("generation failed for a batch of %d", len(items))
                    error = ModelError(TerminationReason.MODEL_ERROR, f"generation failed: {exc}")
                    for item in items:
                        if not item.future.done():
                            item.future.set_exception(error)
                    continue
                for item, result in zip(items, results, strict=True):
                    if not item.future.done():
                        item.future.set_result(result)


class BatchedPolicy(TokenPolicy):
    """A policy whose backend generates a batch per blocking call (transformers'
    ``generate``, ``vllm.LLM.generate``): concurrent turns go through a
    :class:`Batcher`, and subclasses implement :meth:`_generate`."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        default_max_tokens: int = 256,
        max_context: int | None = None,
        batch_window: float = 0.005,
        max_batch: int = 64,
        record: bool = False,
        name: str = "benchmax-generate",
    ) -> None:
        super().__init__(tokenizer, default_max_tokens=default_max_tokens, max_context=max_context, record=record)
        self.generate_calls = 0
        self.batch_lock = threading.Lock()
        """Held while a batch generates: a weight sync takes it to land between batches."""
        self._batcher = Batcher(self._run_batch, window=batch_window, max_batch=max_batch, name=name)

    async def generate(self, request: GenerationRequest) -> Generation:
        return await self._batcher.submit(request)

    def between_turns(self) -> threading.Lock:
        """Held while a batch generates: a weight push that takes it lands between batches."""
        return self.batch_lock

    async def aclose(self) -> None:
        await self._batcher.aclose()

    def close(self) -> None:
        self._batcher.close()

    def _run_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        with self.batch_lock:
            self.generate_calls += 1
            version = self.version
            results = self._generate(requests)
        return [result if result.version is not None else replace(result, version=version) for result in results]

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        raise NotImplementedError


class InProcessPolicy(BatchedPolicy):
    """Chat completions from a local transformers model: the policy being trained,
    with its current weights. ``batch_window`` is how long the first turn of a
    batch waits for others; ``generate_kwargs`` go to ``model.generate``
    (``repetition_penalty``, ``sequence_bias``...)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        default_max_tokens: int = 256,
        batch_window: float = 0.005,
        max_batch: int = 64,
        record: bool = False,
        generate_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            tokenizer,
            default_max_tokens=default_max_tokens,
            max_context=getattr(model.config, "max_position_embeddings", None),
            batch_window=batch_window,
            max_batch=max_batch,
            record=record,
        )
        self.model = model
        self.generate_kwargs = dict(generate_kwargs or {})
        self._lock = threading.Lock()
        self._staged: tuple[int, list[tuple[int, torch.Tensor]]] | None = None
        self._spare: list[tuple[int, torch.Tensor]] | None = None  # what the last swap replaced
        self._staging = threading.Lock()

    def stage_weights(self, source: Any, version: int) -> None:
        """Take ``source``'s current weights for the batches from now on (async generation).

        The policy then generates from a model of its own while the trainer
        updates ``source``. The copy is made here, on the caller's thread, so the
        trainer never waits for a batch in progress; the next batch swaps it in.
        It goes into tensors kept from before (the weights the last swap replaced,
        or a staged set no batch took yet): a fresh copy each step also costs its
        allocation and first-touch page faults, 2-5x the copy itself (0.45-1.3 s
        against 0.17-0.24 s for SmolLM2-135M on 2 cores), on the trainer's thread.
        """
        sources = list(source.parameters())
        if len(sources) != len(list(self.model.parameters())):
            raise ValueError("the trainer's model and the generation copy have different parameters")
        # frozen parameters never change, so only the trained ones are copied
        trained = [(index, parameter.detach()) for index, parameter in enumerate(sources) if parameter.requires_grad]
        with self._staging:  # taken out of the generating thread's reach while they are written
            kept = self._staged[1] if self._staged is not None else self._spare
            self._staged = self._spare = None
        if kept is not None and [(i, t.shape, t.dtype) for i, t in kept] == [(i, p.shape, p.dtype) for i, p in trained]:
            for (_, target), (_, parameter) in zip(kept, trained, strict=True):
                target.copy_(parameter)
        else:
            kept = [(index, parameter.clone()) for index, parameter in trained]
        with self._staging:
            self._staged = (version, kept)

    def _swap_staged(self) -> None:
        """Between batches (under ``_lock``): the staged weights in; the replaced ones kept to stage into."""
        with self._staging:
            staged, self._staged = self._staged, None
        if staged is None:
            return
        version, tensors = staged
        parameters = list(self.model.parameters())
        replaced = [(index, parameters[index].data) for index, _ in tensors]
        for index, tensor in tensors:
            parameters[index].data = tensor
        self.version = version
        with self._staging:
            self._spare = replaced

    def _eos_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return list(ids) if isinstance(ids, list | tuple) else [ids]

    def _generate(self, items: Sequence[GenerationRequest]) -> list[Generation]:
        with self._lock:
            self._swap_staged()
            model = self.model
            version = self.version
            was_training = model.training
            model.eval()
            try:
                if self.generate_kwargs:
                    results = self._generate_hf(items)
                else:
                    results = sample(model, items, eos_ids=self._eos_ids())
            finally:
                if was_training:
                    model.train()
            return [replace(result, version=version) for result in results]

    @torch.no_grad()
    def _generate_hf(self, items: Sequence[GenerationRequest]) -> list[Generation]:
        """One left-padded ``generate`` (for ``generate_kwargs``: HF's logits
        processors); logprobs are log-softmax of the raw logits over the
        sampling temperature, the quantity TRL recomputes for the loss."""
        model = self.model
        device = next(model.parameters()).device
        pad = self.tokenizer.pad_token_id
        width = max(len(item.prompt_ids) for item in items)
        input_ids = torch.full((len(items), width), pad, dtype=torch.long)
        attention = torch.zeros((len(items), width), dtype=torch.long)
        for row, item in enumerate(items):
            input_ids[row, width - len(item.prompt_ids) :] = torch.tensor(item.prompt_ids)
            attention[row, width - len(item.prompt_ids) :] = 1
        temperature = items[0].temperature
        do_sample = temperature > 0
        output = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            max_new_tokens=max(item.max_tokens for item in items),
            do_sample=do_sample,
            temperature=temperature if do_sample else None,
            top_p=items[0].top_p if do_sample else None,
            top_k=0 if do_sample else None,
            pad_token_id=pad,
            eos_token_id=self._eos_ids(),
            return_dict_in_generate=True,
            output_logits=True,
            use_cache=True,
            **self.generate_kwargs,
        )
        generated = output.sequences[:, width:].cpu()
        logits = torch.stack(output.logits, dim=1).float().cpu()
        if do_sample:
            logits = logits / temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, generated.unsqueeze(-1)).squeeze(-1)
        eos = set(self._eos_ids())
        results = []
        for row, item in enumerate(items):
            ids: list[int] = []
            for token in generated[row, : item.max_tokens].tolist():
                ids.append(token)
                if token in eos:
                    break
            finished = bool(ids) and ids[-1] in eos
            results.append(Generation(tuple(ids), tuple(logprobs[row, : len(ids)].tolist()), finished))
        return results
