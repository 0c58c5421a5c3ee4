"""The store's one batching helper: lazy, order-keeping, every item once."""

from __future__ import annotations

import pytest

from benchmax.store import SQL_PARAMETERS, chunks


@pytest.mark.parametrize(("count", "size", "sizes"), [(0, 3, []), (1, 3, [1]), (6, 3, [3, 3]), (7, 3, [3, 3, 1])])
def test_chunks_keeps_every_item_in_order(count, size, sizes):
    parts = list(chunks(range(count), size))
    assert [len(part) for part in parts] == sizes
    assert [item for part in parts for item in part] == list(range(count))


def test_chunks_reads_a_stream_lazily():
    pulled: list[int] = []

    def stream():
        for item in range(10):
            pulled.append(item)
            yield item

    first = next(chunks(stream(), 4))
    assert first == [0, 1, 2, 3]
    assert pulled == [0, 1, 2, 3]


def test_chunks_refuses_a_size_below_one():
    with pytest.raises(ValueError, match="at least 1"):
        next(chunks([1], 0))


def test_sql_parameters_fit_sqlites_oldest_limit():
    assert 0 < SQL_PARAMETERS < 999
