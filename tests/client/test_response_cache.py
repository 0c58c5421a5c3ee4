"""The response cache on disk: its keys, what it keeps, its bound, and two processes writing at once."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from benchmax.client import CACHE_FILE, CacheError, CacheSettings, ChatResult, ResponseCache, request_key
from benchmax.envs import Usage

BODY = {
    "model": "gpt-4o",
    "messages": [{"role": "user", "content": "What is 2 + 2? Ünïcode ok."}],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
    "tool_choice": "auto",
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 64,
    "seed": 3,
    "stop": ["</answer>"],
    "top_k": 20,
}


def reply(text: str = "4", finish: str | None = "stop") -> ChatResult:
    return ChatResult(
        message={"role": "assistant", "content": text},
        finish_reason=finish,
        usage=Usage(12, 3, 8),
        prompt_token_ids=(1, 2, 3),
        completion_token_ids=(4,),
        completion_logprobs=(-0.25,),
    )


def make(directory: Path) -> None:
    cache = ResponseCache(CacheSettings(directory))
    cache.open()
    cache.close()


def test_the_key_is_sha256_of_canonical_json_with_the_format_version_in_it():
    canonical = json.dumps(
        {"draw": None, "format": 1, "request": BODY}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert request_key(BODY) == hashlib.sha256(canonical.encode()).hexdigest()


def test_the_key_ignores_key_order_and_integral_float_spelling_and_is_the_same_in_another_process():
    reordered = dict(reversed(list(BODY.items())))
    reordered["max_tokens"] = 64.0
    assert request_key(reordered) == request_key(BODY)
    code = f"from benchmax.client import request_key; print(request_key({BODY!r}))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert other.stdout.strip() == request_key(BODY)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4o-mini"},
        {"messages": [{"role": "user", "content": "What is 2 + 3?"}]},
        {"tools": []},
        {"tool_choice": "required"},
        {"temperature": 0.8},
        {"top_p": 1.0},
        {"max_tokens": 65},
        {"seed": 4},
        {"stop": ["</a>"]},
        {"top_k": 21},
        {"min_p": 0.05},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_change_to_the_request_changes_the_key(change):
    assert request_key({**BODY, **change}) != request_key(BODY)


def test_a_draw_separates_replies_of_the_same_sampled_request():
    assert request_key(BODY, draw="eval/x#0") != request_key(BODY, draw="eval/x#1")


async def test_a_reply_comes_back_whole_and_incomplete_replies_are_not_kept(tmp_path):
    cache = ResponseCache(CacheSettings(tmp_path / "cache"))
    try:
        assert await cache.get("k") is None
        assert await cache.put("k", reply(), model="gpt-4o") is True
        assert await cache.get("k") == reply()
        assert await cache.put("k", reply("other"), model="gpt-4o") is False, "the first complete reply stays"
        assert await cache.get("k") == reply()
        for finish in (None, "content_filter", "error"):
            assert await cache.put(f"k-{finish}", reply(finish=finish), model="gpt-4o") is False
            assert await cache.get(f"k-{finish}") is None
        assert cache.entries()[0] == 1
    finally:
        cache.close()


async def test_past_its_bound_the_least_recently_used_replies_are_evicted(tmp_path):
    cache = ResponseCache(CacheSettings(tmp_path / "cache", max_bytes=10_000))
    try:
        await cache.put("probe000", reply(), model="m")
        _, size = cache.entries()  # every reply below takes the same bytes (keys of one length)
        fits = 10_000 // size
        for index in range(fits - 1):
            await cache.put(f"old-{index:04d}", reply(), model="m")
        assert cache.entries() == (fits, fits * size), "nothing evicted while within the bound"
        conn = sqlite3.connect(tmp_path / "cache" / CACHE_FILE)
        with conn:  # all used long ago...
            conn.execute("UPDATE responses SET used_at = used_at - 1000")
        conn.close()
        assert await cache.get("probe000") is not None  # ...but this one, just now
        await cache.put("new-0000", reply(), model="m")
        await cache.put("new-0001", reply(), model="m")
        count, stored = cache.entries()
        assert stored <= 10_000 and count < fits
        assert await cache.get("probe000") is not None, "the recently used entry stays"
        assert await cache.get("new-0001") is not None
        assert await cache.get("old-0000") is None, "the least recently used went first"
    finally:
        cache.close()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from benchmax.client import CacheSettings, ChatResult, ResponseCache
    from benchmax.envs import Usage

    async def main(directory, name):
        cache = ResponseCache(CacheSettings(Path(directory), max_bytes=60_000))
        for index in range(300):
            key = f"shared-{index % 150}" if index % 2 else f"{name}-{index}"
            result = ChatResult({"role": "assistant", "content": f"{name} {index} " * 8}, "stop", Usage(index, 1))
            await cache.put(key, result, model="m")
            await cache.get(f"shared-{(index * 7) % 150}")
        cache.close()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def test_two_processes_writing_at_once_leave_a_sound_bounded_cache(tmp_path):
    directory = tmp_path / "cache"
    make(directory)  # before the writers, so both open the same layout
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(directory), name], stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
        assert "failed" not in errors, errors

    conn = sqlite3.connect(directory / CACHE_FILE)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        total = int(conn.execute("SELECT value FROM info WHERE name = 'bytes'").fetchone()[0])
        summed, count = conn.execute("SELECT COALESCE(SUM(size), 0), COUNT(*) FROM responses").fetchone()
        keys = [row[0] for row in conn.execute("SELECT key FROM responses")]
    finally:
        conn.close()
    assert total == summed, "the size accounting matches the entries"
    assert count > 0 and summed <= 60_000
    cache = ResponseCache(CacheSettings(directory))
    try:
        import asyncio

        async def read_all() -> list[ChatResult | None]:
            return [await cache.get(key) for key in keys]

        assert all(isinstance(result, ChatResult) for result in asyncio.run(read_all()))
    finally:
        cache.close()


def test_a_file_that_is_not_a_cache_is_refused_with_what_to_do(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / CACHE_FILE).write_bytes(b"this is not sqlite" * 100)
    cache = ResponseCache(CacheSettings(directory))
    with pytest.raises(CacheError, match=r"is not a benchmax response cache .*delete it or give another --cache"):
        cache.open()
    cache.close()


def test_a_cache_of_another_layout_is_refused(tmp_path):
    directory = tmp_path / "cache"
    make(directory)
    conn = sqlite3.connect(directory / CACHE_FILE)
    with conn:
        conn.execute("UPDATE info SET value = '99' WHERE name = 'layout'")
    conn.close()
    cache = ResponseCache(CacheSettings(directory))
    with pytest.raises(CacheError, match="cache layout 99"):
        cache.open()
    cache.close()


def test_settings_survive_the_runs_metadata_and_bad_ones_are_refused(tmp_path):
    settings = CacheSettings(tmp_path / "c", max_bytes=5, judge=False, unseeded="skip")
    assert CacheSettings.from_meta(json.loads(json.dumps(settings.to_meta()))) == settings
    assert CacheSettings.from_meta(None) is None
    with pytest.raises(ValueError, match="unseeded must be one of per-rollout, skip"):
        CacheSettings(tmp_path, unseeded="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_bytes must be >= 1"):
        CacheSettings(tmp_path, max_bytes=0)


@pytest.mark.parametrize(
    "damage",
    [
        b"",  # emptied
        b"\x78\x9c\x0b\xce\xcf\xcf",  # a zlib stream cut short
        zlib.compress(b'{"message": "not an object", "usage": [1, 2, 3]}'),  # sound bytes, wrong shape
    ],
)
async def test_a_damaged_entry_is_a_logged_miss_and_the_next_reply_takes_its_place(tmp_path, caplog, damage):
    directory = tmp_path / "cache"
    cache = ResponseCache(CacheSettings(directory))
    try:
        assert await cache.put("k", reply(), model="gpt-4o")
        conn = sqlite3.connect(directory / CACHE_FILE)
        conn.execute("UPDATE responses SET value = ? WHERE key = 'k'", (damage,))
        conn.commit()
        conn.close()

        assert await cache.get("k") is None, "never a reply made of damaged bytes"
        assert cache.errors == 1 and "failed to read" in caplog.text
        assert cache.entries() == (0, 0), "the damaged entry is gone"
        conn = sqlite3.connect(directory / CACHE_FILE)
        assert conn.execute("SELECT value FROM info WHERE name = 'bytes'").fetchone() == ("0",), "and its size"
        conn.close()
        assert await cache.put("k", reply("fresh"), model="gpt-4o")
        assert await cache.get("k") == reply("fresh")
    finally:
        cache.close()
