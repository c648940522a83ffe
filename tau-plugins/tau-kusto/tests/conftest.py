"""One loopback Kusto endpoint (with Azurite for queued ingestion) per test session, its schema applied
through the real client from the generated KQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tau_core.hookspecs import hookimpl
from tau_core.kql import schema_commands
from tau_kusto.history import KustoHistory
from tau_testing.kusto import LoopbackKusto, StaticToken, start_kusto


@pytest.fixture(scope="session")
def kusto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackKusto]:
    try:
        fake = start_kusto(tmp_path_factory.mktemp("azurite"))
    except Exception as exc:  # fails, never skips: Azurite comes from npm via tests/tools/ensure-azurite.sh
        pytest.fail(f"cannot start the loopback Kusto endpoint: {exc}", pytrace=False)
    client = fake.client()
    for command in schema_commands("all"):
        client.execute_mgmt("Metrics", command)
    yield fake
    fake.stop()


@pytest.fixture
def kusto_up(kusto: LoopbackKusto) -> Iterator[LoopbackKusto]:
    """The session endpoint, guaranteed up again after the test."""
    kusto.endpoint.down = False
    yield kusto
    kusto.endpoint.down = False


class LoopbackCredential:
    """The real history source, handed the loopback endpoint's test token (it stands in for an Entra sign-in)."""

    @hookimpl
    def tau_register_history_sources(self, register: Any) -> None:
        register("kusto", lambda **options: KustoHistory(credential=StaticToken(), **options), priority=1)


@pytest.fixture
def loopback_history() -> Iterator[None]:
    """The process's plugin host with the loopback credential in front of the ``kusto`` history source."""
    from tau_core.plugins import Host, set_host

    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    try:
        yield
    finally:
        set_host(previous)
