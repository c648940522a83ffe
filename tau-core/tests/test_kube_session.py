"""The Kubernetes session against the simulated API server: kubeconfig, retries, error mapping."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from tau_core.errors import ClusterError
from tau_core.kube import (
    KubeApiError,
    KubeConfig,
    KubeSession,
    RetryPolicy,
    WriteOutcomeUnknown,
    api_path,
    is_private,
    kubeconfig_paths,
    write_private_kubeconfig,
)
from tau_testing.sim import SimCluster
from tau_testing.sim.scenarios.taugrid import TauGridScenario

WS = api_path("tau.azure.com/v1alpha1", "workspaces", namespace="tau-system")
FAST = RetryPolicy(attempts=8, base=0.001, cap=0.01, max_retry_after=0.05)


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    cluster = SimCluster().start()
    scenario = TauGridScenario.install(cluster, tmp_path_factory.mktemp("vol"))
    kubeconfig = cluster.write_kubeconfig(tmp_path_factory.mktemp("kc") / "config", user="researcher")
    yield cluster, scenario, kubeconfig
    cluster.stop()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def _session(kubeconfig: Path, context: str | None = None, retry: RetryPolicy = FAST) -> KubeSession:
    return await KubeSession.connect(kubeconfig=kubeconfig, context=context, retry=retry)


def test_reads_workspace_through_kubeconfig_current_context(grid) -> None:  # type: ignore[no-untyped-def]
    _, _, kubeconfig = grid

    async def go() -> tuple[list[str], int, str]:
        async with await _session(kubeconfig) as s:
            items = await s.list_items(WS)
            return [i["metadata"]["name"] for i in items], s.requests, s.context

    names, requests, context = run(go())
    assert names == ["aurora"]
    assert requests == 1
    assert context == "tau-sim-researcher"


def test_explicit_context_selects_another_user(grid) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid

    async def go() -> str:
        async with await _session(kubeconfig, context=cluster.context_for("outsider")) as s:
            await s.list_items(api_path("batch/v1", "jobs", namespace="aurora"))
        return "listed"

    with pytest.raises(KubeApiError) as err:
        run(go())
    assert err.value.status == 403
    assert 'you may not list jobs.batch in namespace "aurora"' in err.value.message
    assert "platform team" in (err.value.hint or "")


def test_unknown_context_lists_available(grid) -> None:  # type: ignore[no-untyped-def]
    _, _, kubeconfig = grid
    with pytest.raises(ClusterError) as err:
        run(_session(kubeconfig, context="nope"))
    assert 'context "nope" not found' in err.value.message
    assert "tau-sim-researcher" in err.value.message


def test_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as err:
        run(_session(tmp_path / "absent"))
    assert "no kubeconfig found" in err.value.message


def test_malformed_kubeconfig_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "config"
    bad.write_text("clusters: [\n")
    with pytest.raises(Exception) as err:
        run(_session(bad))
    assert str(bad) in str(err.value)


def test_missing_crd_says_not_a_taugrid_cluster(grid) -> None:  # type: ignore[no-untyped-def]
    _, _, kubeconfig = grid

    async def go() -> None:
        async with await _session(kubeconfig) as s:
            await s.list_items(api_path("tau.azure.com/v1alpha1", "nonexistent", namespace="tau-system"))

    with pytest.raises(KubeApiError) as err:
        run(go())
    assert "not a TauGrid cluster" in err.value.message
    assert "tau cluster install" in (err.value.hint or "")


def test_expired_credential_is_401_with_hint(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _, _ = grid
    config = cluster.kubeconfig("researcher")
    for user in config["users"]:
        user["user"]["token"] = "expired-token"
    path = tmp_path / "config"
    path.write_text(json.dumps(config))

    async def go() -> None:
        async with await _session(path) as s:
            await s.list_items(WS)

    with pytest.raises(KubeApiError) as err:
        run(go())
    assert err.value.status == 401
    assert "rejected the credential" in err.value.message
    assert "sign in again" in (err.value.hint or "")


def test_unreachable_server_names_url(tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "gone",
              "clusters": [{"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "u"}}]}
    path = tmp_path / "config"
    path.write_text(json.dumps(config))

    async def go() -> int:
        async with await _session(path) as s:
            try:
                await s.list_items(WS)
            finally:
                retries = s.retries
        return retries

    with pytest.raises(KubeApiError) as err:
        run(go())
    assert "cannot reach the Kubernetes API server at http://127.0.0.1:9" in err.value.message
    assert "VPN" in (err.value.hint or "")


def test_reads_retry_through_503_and_429_with_retry_after(grid) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid
    f1 = cluster.faults.add(method="GET", path_regex="/workspaces", status=503, count=3)
    f2 = cluster.faults.add(method="GET", path_regex="/workspaces", status=429, count=5, retry_after=1)
    try:
        async def go() -> tuple[int, int]:
            async with await _session(kubeconfig) as s:
                items = await s.list_items(WS)
                assert items
                return s.requests, s.retries

        requests, retries = run(go())
    finally:
        f1.remove()
        f2.remove()
    # the two faults fire together on the first three requests, then the 429 twice more
    assert retries == 5
    assert requests == 6


def test_reads_give_up_with_a_clear_message(grid) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid
    fault = cluster.faults.add(method="GET", path_regex="/workspaces", status=503)
    try:
        async def go() -> None:
            async with await _session(kubeconfig, retry=RetryPolicy(attempts=3, base=0.001, cap=0.001)) as s:
                await s.list_items(WS)

        with pytest.raises(KubeApiError) as err:
            run(go())
    finally:
        fault.remove()
    assert "kept failing (503" in err.value.message


def test_writes_are_never_retried(grid) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid
    fault = cluster.faults.add(method="POST", path_regex="/configmaps", status=503, count=1)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "once", "namespace": "aurora"}}
    before = len(cluster.requests.entries)
    try:
        async def go() -> None:
            async with await _session(kubeconfig) as s:
                await s.create(api_path("v1", "configmaps", namespace="aurora"), body)

        with pytest.raises(KubeApiError) as err:
            run(go())
    finally:
        fault.remove()
    assert err.value.status == 503
    posts = [r for r in cluster.requests.entries[before:] if r.method == "POST"]
    assert len(posts) == 1


def test_lost_write_is_reported_as_unknown_outcome(grid, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid
    monkeypatch.setenv("TAU_REQUEST_TIMEOUT", "0.3")
    fault = cluster.faults.latency(1.0, method="POST", path_regex="/configmaps", count=1)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slow", "namespace": "aurora"}}
    try:
        async def go() -> None:
            async with await _session(kubeconfig) as s:
                await s.create(api_path("v1", "configmaps", namespace="aurora"), body)

        with pytest.raises(WriteOutcomeUnknown) as err:
            run(go())
    finally:
        fault.remove()
    assert "may or may not have been applied" in err.value.message


def test_private_kubeconfig_isolates_one_context(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _, kubeconfig = grid
    config = KubeConfig.load(kubeconfig)
    isolated = config.isolate(cluster.context_for("researcher"))
    assert [c["name"] for c in isolated["contexts"]] == ["tau-sim-researcher"]
    assert [u["name"] for u in isolated["users"]] == ["researcher"]
    target = write_private_kubeconfig(isolated, tmp_path / "private" / "nested" / "kc.yaml")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert is_private(target)
    assert not list(target.parent.glob(".candidate-*"))

    async def go() -> list[dict[str, object]]:
        async with await _session(target) as s:
            return await s.list_items(WS)

    assert run(go())


def test_kubeconfig_env_lists_paths(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    paths = kubeconfig_paths(env={"KUBECONFIG": f"{a}{os.pathsep}{b}", "HOME": str(tmp_path)})
    assert paths == [a, b]
    assert kubeconfig_paths(env={"HOME": str(tmp_path)}) == [tmp_path / ".kube" / "config"]
    assert kubeconfig_paths("~/x", env={}) == [Path("~/x").expanduser()]


def test_retry_policy_backoff_and_retry_after() -> None:
    policy = RetryPolicy(base=1.0, cap=4.0)
    assert policy.delay(1, "3") == 3.0
    assert 0.5 <= policy.delay(1) <= 1.0
    assert 2.0 <= policy.delay(5) <= 4.0
    assert policy.delay(1, "60") == policy.max_retry_after


def test_json_kubeconfig_needs_no_yaml_parser(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    cluster, _, kubeconfig = grid
    target = write_private_kubeconfig(KubeConfig.load(kubeconfig).isolate(cluster.context_for("researcher")),
                                      tmp_path / "private" / "kc.yaml")
    probe = ("import sys; from tau_core.kube import KubeConfig; "
             f"c = KubeConfig.load({str(target)!r}); print(c.current_context, 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["tau-sim-researcher", "False"]
    broken = tmp_path / "broken"
    broken.write_text('{"clusters": [\n')
    with pytest.raises(Exception) as err:
        KubeConfig.load(broken)
    assert str(broken) in str(err.value) and "not valid YAML" in str(err.value)
