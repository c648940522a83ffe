"""Controller scenarios driven through kubernetes-asyncio against the running simulated API server."""

from __future__ import annotations

import asyncio

import pytest

from tau_testing.sim.client import api_client, run
from tau_testing.sim.controllers import add_node, kit
from tau_testing.sim.scripts import PodScript, scripts_of


def _prepare(cluster, cpu_quota: str = "4") -> None:
    add_node(cluster, "cpu-1", cpu="8", memory="32Gi")
    kit.queue_setup(cluster, flavors=[kit.Flavor("default-flavor", {"cpu": cpu_quota, "memory": "16Gi"})])


def test_job_admitted_completed_and_logged_over_http(sim_cluster_factory) -> None:
    cluster = sim_cluster_factory()
    _prepare(cluster)
    scripts_of(cluster).add({"job-name": "hello"}, PodScript(run_seconds=4, log_every=1,
                                                             logs=["epoch 1", "epoch 2", "epoch 3"]))

    async def go() -> None:
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            batch, core, custom = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)
            await batch.create_namespaced_job("team", kit.job("hello", cpu="2"))
            job = await batch.read_namespaced_job("hello", "team")
            assert job.spec.suspend is False  # admitted right after the write (auto-settle)
            workloads = await custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team", "workloads")
            (wl,) = workloads["items"]
            assert {c["type"]: c["status"] for c in wl["status"]["conditions"]} == {"QuotaReserved": "True",
                                                                                    "Admitted": "True"}
            cluster.advance(10)
            job = await batch.read_namespaced_job_status("hello", "team")
            assert job.status.succeeded == 1
            assert [c.type for c in job.status.conditions if c.status == "True"] == ["SuccessCriteriaMet",
                                                                                     "Complete"]
            pods = await core.list_namespaced_pod("team", label_selector="job-name=hello")
            (pod,) = pods.items
            assert pod.status.phase == "Succeeded"
            assert pod.status.container_statuses[0].state.terminated.reason == "Completed"
            text = await core.read_namespaced_pod_log(pod.metadata.name, "team", container="main", timestamps=True)
            assert [line.split(" ", 1)[1] for line in text.splitlines()] == ["epoch 1", "epoch 2", "epoch 3"]
            events = await core.list_namespaced_event("team")
            pod_reasons = [e.reason for e in events.items if e.involved_object.name == pod.metadata.name]
            assert {"Scheduled", "Pulled", "Created", "Started"} <= set(pod_reasons)
            cq = await custom.get_cluster_custom_object_status("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq")
            assert cq["status"]["admittedWorkloads"] == 0

    run(go())


def test_pending_job_counts_over_http(sim_cluster_factory) -> None:
    cluster = sim_cluster_factory()
    _prepare(cluster, cpu_quota="2")
    scripts_of(cluster).add({}, PodScript(run_seconds=100))

    async def go() -> None:
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            batch, custom = client.BatchV1Api(api), client.CustomObjectsApi(api)
            await batch.create_namespaced_job("team", kit.job("one", cpu="2"))
            await batch.create_namespaced_job("team", kit.job("two", cpu="2"))
            cq = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq")
            assert (cq["status"]["pendingWorkloads"], cq["status"]["admittedWorkloads"]) == (1, 1)
            lq = await custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team", "localqueues", "lq")
            assert lq["status"]["pendingWorkloads"] == 1
            wls = await custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team", "workloads")
            pending = [w for w in wls["items"] if w["status"]["conditions"][0]["status"] == "False"]
            assert pending[0]["status"]["conditions"][0]["message"] == (
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, "
                "2 more needed")
            two = await batch.read_namespaced_job("two", "team")
            assert two.spec.suspend is True

    run(go())


def test_deployment_scale_subresource_over_http(sim_cluster_factory) -> None:
    cluster = sim_cluster_factory()
    add_node(cluster, "node-1")
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})

    async def go() -> None:
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
            await apps.create_namespaced_deployment("team", kit.deployment("web", replicas=1))
            await apps.patch_namespaced_deployment_scale("web", "team", {"spec": {"replicas": 3}})
            pods = await core.list_namespaced_pod("team", label_selector="app=web")
            assert len(pods.items) == 3
            deployment = await apps.read_namespaced_deployment_status("web", "team")
            assert deployment.status.ready_replicas == 3 and deployment.status.replicas == 3

    run(go())


@pytest.mark.realclock
def test_real_time_mode_runs_a_job_to_completion(sim_cluster_factory) -> None:
    """Real clock, real threads: every wait is on a condition with a generous deadline (a loaded 2-core machine
    may take seconds where an idle one takes milliseconds)."""
    cluster = sim_cluster_factory(clock="real", time_scale=50)
    _prepare(cluster)

    async def go() -> None:
        from kubernetes_asyncio import client, watch

        async with api_client(cluster) as api:
            batch, custom = client.BatchV1Api(api), client.CustomObjectsApi(api)
            await batch.create_namespaced_job("team", kit.job("quick", cpu="1"))
            done = False
            stream = watch.Watch().stream(batch.list_namespaced_job, "team", timeout_seconds=120)
            async with asyncio.timeout(120):
                async for event in stream:
                    job = event["object"]
                    if any(c.type == "Complete" and c.status == "True" for c in (job.status.conditions or [])):
                        done = True
                        break
            assert done

            async def released() -> bool:
                wls = await custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "team", "workloads")
                cq = await custom.get_cluster_custom_object_status("kueue.x-k8s.io", "v1beta2", "clusterqueues",
                                                                   "cq")
                finished = any(c["type"] == "Finished" and c["status"] == "True"
                               for c in wls["items"][0]["status"].get("conditions") or [])
                return finished and (cq.get("status") or {}).get("admittedWorkloads") == 0

            # Kueue marks the Workload Finished after it sees the Job complete, and releases the ClusterQueue's
            # admission in a later write (as the real Kueue does): wait for both rather than read once
            async with asyncio.timeout(120):
                while not await released():
                    await asyncio.sleep(0.05)

    run(go())
