"""Synchronous edges over async capabilities, on anyio.

* :func:`run` runs one coroutine function to completion (``anyio.run``; from a thread that already
  runs an event loop, such as a notebook, it runs in a blocking portal's own thread instead).
* :func:`iterate` turns an async *producer* into a synchronous iterator.  The producer runs in a
  blocking portal (an event loop in a worker thread) and hands each item over a zero-buffer memory
  stream, so it never runs ahead of the consumer.  When the consumer stops early, raises, or is
  interrupted (Ctrl-C lands in the consumer's thread), the producer task is cancelled and awaited,
  so every ``finally`` and every connection is closed before the iterator returns.

A producer is ``async def producer(*args, emit)``; it calls ``await emit(item)`` for each item.
It may use task groups and cancel scopes freely: nothing is yielded across them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")
Emit = Callable[[T], Awaitable[None]]


def _in_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run an async capability from synchronous code (the CLI edge)."""
    import anyio

    if not _in_event_loop():
        return anyio.run(fn, *args)
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as portal:
        return portal.call(fn, *args)


async def gather(*calls: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Await ``calls`` concurrently in a task group; their results in order.  The first error is raised as
    itself (siblings are cancelled), like :func:`asyncio.gather` without ``return_exceptions``."""
    import anyio

    results: list[Any] = [None] * len(calls)

    async def one(index: int) -> None:
        results[index] = await calls[index]()

    try:
        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(one, index)
    except BaseExceptionGroup as errors:
        raise first_error(errors) from None
    return results


def first_error(exc: BaseException) -> BaseException:
    """The first error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def iterate(producer: Callable[..., Awaitable[None]], *args: Any) -> Generator[Any, None, None]:
    """Items a producer emits, one at a time, from synchronous code (see the module docstring)."""
    import anyio
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as portal:
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            async with send:
                try:
                    await producer(*args, emit=send.send)
                except BaseExceptionGroup as group:
                    raise first_error(group) from None

        future = portal.start_task_soon(pump)
        try:
            while True:
                try:
                    item = portal.call(receive.receive)
                except anyio.EndOfStream:
                    break
                yield item
            future.result()  # the producer's own error, if it stopped with one
        finally:
            if not future.done():
                future.cancel()
            portal.call(receive.aclose)


__all__ = ["Emit", "first_error", "gather", "iterate", "run"]
