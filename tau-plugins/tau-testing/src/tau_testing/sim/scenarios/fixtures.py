"""pytest fixtures for the TauGrid scenario (loaded by tau-testing's pytest plugin).

``taugrid_cluster``: a started, fake-clock simulated cluster with the TauGrid scenario installed, and
``tau_env["KUBECONFIG"]`` pointing at a kubeconfig whose current context is the ``researcher`` user.
``taugrid_factory(clock="real", time_scale=20)`` builds more (for ``--watch``/``-f`` in real time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_testing.sim.scenarios.taugrid import RESEARCHER, TauGridScenario


def _build(tmp: Path, env: dict[str, str | None], *, clock: str = "fake", time_scale: float = 1.0,
           user: str = RESEARCHER, **options: Any) -> TauGridScenario:
    from tau_testing.sim import SimCluster

    kwargs: dict[str, Any] = {"clock": clock}
    if clock == "real":
        kwargs["time_scale"] = time_scale
    cluster = SimCluster(**kwargs).start()
    try:
        scenario = TauGridScenario.install(cluster, tmp / "volume", **options)
        kubeconfig = cluster.write_kubeconfig(tmp / "kube" / "config", user=user)
    except BaseException:
        cluster.stop()
        raise
    scenario.kubeconfig = kubeconfig  # type: ignore[attr-defined]
    env["KUBECONFIG"] = str(kubeconfig)
    return scenario


@pytest.fixture
def taugrid_factory(tmp_path_factory: pytest.TempPathFactory,
                    tau_env: dict[str, str | None]) -> Iterator[Callable[..., TauGridScenario]]:
    """Build TauGrid clusters on demand: ``taugrid_factory(clock="real", time_scale=20)``."""
    built: list[TauGridScenario] = []

    def make(**options: Any) -> TauGridScenario:
        scenario = _build(tmp_path_factory.mktemp("taugrid"), tau_env, **options)
        built.append(scenario)
        return scenario

    yield make
    for scenario in built:
        scenario.cluster.stop()


@pytest.fixture
def taugrid_cluster(taugrid_factory: Callable[..., TauGridScenario]) -> TauGridScenario:
    """A fake-clock TauGrid cluster; ``tau_cli`` talks to it as the ``researcher`` user."""
    return taugrid_factory()
