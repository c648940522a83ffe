"""`tau_core.aio`: the synchronous edges over async capabilities, on anyio."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import pytest

from tau_core.aio import gather, iterate, run
from tau_core.errors import NotFoundError


def test_iterate_hands_over_items_in_order_and_ends_with_the_producer() -> None:
    async def count(n: int, *, emit: Callable[[int], Awaitable[None]]) -> None:
        for i in range(n):
            await emit(i)

    assert list(iterate(count, 5)) == [0, 1, 2, 3, 4]


def test_stopping_early_cancels_the_producer_and_runs_its_cleanup() -> None:
    cleaned: list[str] = []

    async def forever(*, emit: Callable[[str], Awaitable[None]]) -> None:
        try:
            async with anyio.create_task_group() as group:  # a task group across emits is fine
                group.start_soon(anyio.sleep_forever)
                while True:
                    await emit("tick")
        finally:
            cleaned.append("closed")

    items = iterate(forever)
    assert next(items) == "tick"
    items.close()
    assert cleaned == ["closed"]


def test_a_producer_error_reaches_the_consumer_as_itself() -> None:
    async def failing(*, emit: Callable[[str], Awaitable[None]]) -> None:
        await emit("first")
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.sleep_forever)
            raise NotFoundError("no such run", hint="check the name")

    items = iterate(failing)
    assert next(items) == "first"
    with pytest.raises(NotFoundError, match="no such run"):
        next(items)


def test_gather_returns_results_in_order_and_raises_the_first_error_plainly() -> None:
    async def value(x: int) -> int:
        await anyio.sleep(0.01 * (3 - x))
        return x

    async def main() -> list[int]:
        return await gather(lambda: value(1), lambda: value(2), lambda: value(3))

    assert run(main) == [1, 2, 3]

    async def broken() -> list[int]:
        async def fail() -> int:
            raise NotFoundError("gone")

        return await gather(lambda: value(1), fail)

    with pytest.raises(NotFoundError, match="gone"):
        run(broken)


def test_run_and_iterate_work_inside_a_running_event_loop() -> None:
    async def double(x: int) -> int:
        return 2 * x

    async def count(*, emit: Callable[[int], Awaitable[None]]) -> None:
        await emit(1)

    async def host() -> tuple[int, list[int]]:
        return run(double, 21), list(iterate(count))

    assert asyncio.run(host()) == (42, [1])
