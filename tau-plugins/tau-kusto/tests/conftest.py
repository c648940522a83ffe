"""One loopback Kusto endpoint (with Azurite for queued ingestion) per test session, its schema applied
through the real client from the generated KQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tau_core.kql import schema_commands
from tau_testing.kusto import LoopbackKusto, start_kusto


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
