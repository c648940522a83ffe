"""Leader election: two replicas against one simulated cluster never write at once."""

from __future__ import annotations

from typing import Any

import pytest
from ctrl_platform import workspace

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import SYSTEM_NAMESPACE

pytestmark = pytest.mark.realclock  # the controller runs in real time

TAU = keys.API_VERSION
FAST = {"leader_elect": True, "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}


def _writes(cluster: Any, user: str) -> list[Any]:
    return [r for r in cluster.requests.entries
            if r.user == user and r.method in ("POST", "PUT", "PATCH", "DELETE") and r.resource != "leases.coordination.k8s.io"]


def _phase(cluster: Any, name: str) -> str | None:
    return ((cluster.store.get(TAU, "TauWorkspace", SYSTEM_NAMESPACE, name) or {}).get("status") or {}).get("phase")


def test_only_the_lease_holder_reconciles_and_a_standby_takes_over(platform, controller_factory):
    for user in ("replica-a", "replica-b"):
        platform.add_user(user, ["system:masters"])
    leader = controller_factory(platform, user="replica-a", identity="replica-a", **FAST)
    standby = controller_factory(platform, user="replica-b", identity="replica-b", wait_ready=False, **FAST)
    lease = platform.store.get("coordination.k8s.io/v1", "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE)
    assert lease["spec"]["holderIdentity"] == "replica-a"

    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    assert _writes(platform, "replica-a") and not _writes(platform, "replica-b")
    assert not standby.ready.is_set()

    leader.stop()
    stopped_at = len(platform.requests.entries)
    assert standby.ready.wait(20), "the standby never took over"
    platform.store.create(workspace("borealis"))
    platform.wait_for(lambda: _phase(platform, "borealis") == "Degraded", timeout=20)
    assert _writes(platform, "replica-b")
    assert not [r for r in platform.requests.entries[stopped_at:] if r.user == "replica-a"]
    lease = platform.store.get("coordination.k8s.io/v1", "Lease", SYSTEM_NAMESPACE, keys.CONTROLLER_LEASE)
    assert lease["spec"]["holderIdentity"] == "replica-b" and lease["spec"]["leaseTransitions"] >= 1


def test_a_leader_that_cannot_renew_stops_before_the_standby_starts(platform, controller_factory):
    import time

    for user in ("replica-a", "replica-b"):
        platform.add_user(user, ["system:masters"])
    leader = controller_factory(platform, user="replica-a", identity="replica-a", **FAST)
    platform.store.create(workspace())
    platform.wait_for(lambda: _phase(platform, "aurora") == "Ready", timeout=20)
    standby = controller_factory(platform, user="replica-b", identity="replica-b", wait_ready=False, **FAST)
    platform.faults.add(method="PUT", path_regex="/leases/", status=500, user="replica-a")  # renewals fail
    assert standby.ready.wait(20), "the standby never took over"
    deadline = time.monotonic() + 10
    while leader._thread is not None and leader._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leader.lost_leadership
    entries = platform.requests.entries
    last_a = max(i for i, r in enumerate(entries) if r.user == "replica-a" and r.method != "GET"
                 and r.resource != "leases.coordination.k8s.io") if _writes(platform, "replica-a") else -1
    first_b = min((i for i, r in enumerate(entries) if r.user == "replica-b" and r.resource ==
                   "leases.coordination.k8s.io" and r.method == "PUT" and r.status == 200), default=len(entries))
    assert last_a < first_b
