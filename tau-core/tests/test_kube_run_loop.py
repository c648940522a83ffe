"""`tau_core.kube.run` from synchronous code, with or without a running event loop."""

from __future__ import annotations


def test_kube_run_works_inside_a_running_event_loop():
    """Capabilities are callable from notebooks and async hosts, where a loop already runs."""
    import asyncio

    from tau_core.kube import run

    async def answer(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    async def host() -> int:
        return run(answer, 21)

    assert run(answer, 1) == 2
    assert asyncio.run(host()) == 42
