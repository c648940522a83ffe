"""Leader election: two replicas against one simulated cluster never write at once.

The timing rules (expiry measured from when a standby *saw* the Lease change; a leader's authority measured from
the *start* of its last renewal; the write gate) are proven with an injected clock and no threads.  Only the two
end-to-end tests run real replicas in real time: their lease timings are generous (a renewal round on a loaded
2-core machine, with the simulator in the same process, takes up to ~1.5 s) and they wait on conditions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from ctrl_platform import workspace

from tau_controller.leader import GatedSession, LeaderElector, NotLeading
from tau_controller.serve import Metrics
from tau_core import keys
from tau_core.kube import KubeSession
from tau_testing.sim.scenarios.taugrid import SYSTEM_NAMESPACE

TAU = keys.API_VERSION
LEASE_API = "coordination.k8s.io/v1"
# Real time.  The renewals share the event loop with kopf's start-up (a dozen initial listings) and the simulator
# shares the process: with a load average of 15-20 on 2 cores one renewal round was seen to take over 8 s.
# A takeover after a release is immediate, so the steady test can afford a long deadline ...
STEADY = {"leader_elect": True, "lease_duration": 30.0, "renew_deadline": 20.0, "retry_period": 0.5}
# ... and the expiry test waits the Lease out (~20 s), leaving 5 s for a write already on the wire
EXPIRING = {"leader_elect": True, "lease_duration": 20.0, "renew_deadline": 15.0, "retry_period": 0.5}
POLL = 0.25  # the test's own polling settles the fake-clock cluster each time: keep it from hogging the GIL


def _writes(cluster: Any, user: str) -> list[Any]:
    return [r for r in cluster.requests.entries
            if r.user == user and r.method in ("POST", "PUT", "PATCH", "DELETE") and r.resource != "leases.coordination.k8s.io"]


def _phase(cluster: Any, name: str) -> str | None:
    return ((cluster.store.get(TAU, "TauWorkspace", SYSTEM_NAMESPACE, name) or {}).get("status") or {}).get("phase")


def _holder(cluster: Any) -> str | None:
    lease = cluster.store.get(LEASE_API, "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


# -- the timing rules, on an injected clock -----------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(session: KubeSession, clock: Clock, identity: str = "replica-b") -> LeaderElector:
    options = SimpleNamespace(system_namespace=SYSTEM_NAMESPACE, identity=identity, lease_duration=15.0,
                              renew_deadline=10.0, retry_period=2.0)
    return LeaderElector(session, options, Metrics(), on_lost=lambda: None, clock=clock)


def _lease(holder: str | None, renewed: datetime, duration: int = 15) -> dict[str, Any]:
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"apiVersion": LEASE_API, "kind": "Lease",
            "metadata": {"name": keys.CONTROLLER_LEASE, "namespace": SYSTEM_NAMESPACE},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": stamp,
                     "renewTime": stamp, "leaseTransitions": 0}}


def _renew_as_other(cluster: Any) -> None:
    lease = cluster.store.get(LEASE_API, "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE)
    lease["spec"]["renewTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.store.update(lease)


@pytest.fixture
def lease_cluster(sim_cluster_factory: Any) -> Any:
    cluster = sim_cluster_factory(controllers=False)
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
    return cluster


def _run(cluster: Any, body: Any, session_class: type[KubeSession] = KubeSession) -> Any:
    async def go() -> Any:
        async with await session_class.connect(kubeconfig=cluster.kubeconfig_path) as session:
            return await body(session)

    return asyncio.run(go())


def test_a_standby_times_the_lease_from_when_it_saw_it_change_not_from_the_holders_clock(lease_cluster):
    # the holder's clock is an hour behind: comparing its renewTime with ours would steal a live Lease at once
    lease_cluster.store.create(_lease("replica-a", datetime.now(UTC) - timedelta(hours=1)))
    clock = Clock()

    async def body(session: KubeSession) -> list[bool]:
        elector, seen = _elector(session, clock), []
        seen.append(await elector._try())  # first sight of the record starts the count
        clock.now += 14.0
        seen.append(await elector._try())
        _renew_as_other(lease_cluster)  # the holder renews: the count restarts when this replica sees it
        seen.append(await elector._try())
        clock.now += 14.0
        seen.append(await elector._try())
        clock.now += 1.5  # 15.5 s without a change: expired
        seen.append(await elector._try())
        return seen

    assert _run(lease_cluster, body) == [False, False, False, False, True]
    assert _holder(lease_cluster) == "replica-b"


def test_a_released_lease_is_taken_at_once(lease_cluster):
    lease_cluster.store.create(_lease(None, datetime.now(UTC), duration=1))

    async def body(session: KubeSession) -> bool:
        return await _elector(session, Clock())._try()

    assert _run(lease_cluster, body) is True
    lease = lease_cluster.store.get(LEASE_API, "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE)
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] == 1


def test_a_leaders_authority_runs_from_the_start_of_its_renewal_not_from_the_slow_reply(lease_cluster):
    clock = Clock()

    class SlowNetwork(KubeSession):  # every reply arrives 3 s (of the injected clock) after it was sent
        async def request(self, method: str, path: str, **kwargs: Any) -> Any:
            result = await super().request(method, path, **kwargs)
            clock.now += 3.0
            return result

    async def body(session: KubeSession) -> list[bool]:
        elector = _elector(session, clock)
        started = clock.now
        assert await elector._try()  # GET + POST: the reply comes back at started + 3
        elector.leading = True
        states = [elector.may_write()]
        clock.now = started + 9.99
        states.append(elector.may_write())
        clock.now = started + 10.0  # renew_deadline after the round *started*, although it ended at +3
        states.append(elector.may_write())
        return states

    assert _run(lease_cluster, body, SlowNetwork) == [True, True, False]


def test_the_write_gate_refuses_writes_without_sending_them_and_lets_reads_through(lease_cluster):
    async def body(session: KubeSession) -> None:
        assert isinstance(session, GatedSession)
        session.gate = lambda: False
        assert await session.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}")
        with pytest.raises(NotLeading, match="does not hold the leader Lease"):
            await session.create(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps",
                                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        session.gate = lambda: True
        await session.create(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/configmaps",
                             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}})

    _run(lease_cluster, body, GatedSession)
    posts = [r for r in lease_cluster.requests.entries if r.method == "POST"]
    assert len(posts) == 1
    assert lease_cluster.store.get("v1", "ConfigMap", SYSTEM_NAMESPACE, "x") is None
    assert lease_cluster.store.get("v1", "ConfigMap", SYSTEM_NAMESPACE, "y") is not None


# -- two real replicas in real time --------------------------------------------------------------------------------
@pytest.mark.realclock
def test_only_the_lease_holder_reconciles_and_a_standby_takes_over(platform, controller_factory):
    for user in ("replica-a", "replica-b"):
        platform.add_user(user, ["system:masters"])
    leader = controller_factory(platform, user="replica-a", identity="replica-a", **STEADY)
    standby = controller_factory(platform, user="replica-b", identity="replica-b", wait_ready=False, **STEADY)
    assert _holder(platform) == "replica-a"

    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=60, interval=POLL)
    assert _writes(platform, "replica-a") and not _writes(platform, "replica-b")
    assert not standby.ready.is_set()

    leader.stop()  # releases the Lease: no wait for expiry
    stopped_at = len(platform.requests.entries)
    assert standby.ready.wait(60), "the standby never took over"
    platform.store.create(workspace("borealis"))
    platform.wait_for(lambda: _phase(platform, "borealis") == "Degraded", timeout=60, interval=POLL)
    assert _writes(platform, "replica-b")
    assert not [r for r in platform.requests.entries[stopped_at:] if r.user == "replica-a"]
    lease = platform.store.get(LEASE_API, "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE)
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] >= 1


@pytest.mark.slow
@pytest.mark.realclock
def test_a_leader_that_cannot_renew_stops_before_the_standby_starts(platform, controller_factory):
    for user in ("replica-a", "replica-b"):
        platform.add_user(user, ["system:masters"])
    leader = controller_factory(platform, user="replica-a", identity="replica-a", **EXPIRING)
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=60, interval=POLL)
    standby = controller_factory(platform, user="replica-b", identity="replica-b", wait_ready=False, **EXPIRING)
    platform.faults.add(method="PUT", path_regex="/leases/", status=500, user="replica-a")  # renewals fail
    assert standby.ready.wait(90), "the standby never took over"
    platform.wait_for(lambda: leader.lost_leadership, timeout=60, interval=POLL)
    entries = list(platform.requests.entries)
    last_a = max((i for i, r in enumerate(entries) if r.user == "replica-a" and r.method != "GET"
                  and r.resource != "leases.coordination.k8s.io"), default=-1)
    first_b = min((i for i, r in enumerate(entries) if r.user == "replica-b" and r.resource ==
                   "leases.coordination.k8s.io" and r.method == "PUT" and r.status == 200), default=len(entries))
    assert last_a < first_b
    assert _holder(platform) == "replica-b"
