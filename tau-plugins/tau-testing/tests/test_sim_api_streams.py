"""Watches, custom resources, pod logs and the scale subresource of the simulated cluster, through
kubernetes-asyncio over real HTTP."""

from __future__ import annotations

import json

from tau_testing.sim.client import api_client, configmap, expect_api_error, pod, run

# -- watch -------------------------------------------------------------------------------------------------------

def test_watch_from_resource_version_with_timeout(cluster):
    cluster.store.create(configmap("old"))

    async def go():
        from kubernetes_asyncio import client, watch

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            listed = await v1.list_namespaced_config_map("default")
            rv = listed.metadata.resource_version
            cluster.store.create(configmap("new"))
            cluster.store.patch("v1", "ConfigMap", "default", "new", {"data": {"k": "2"}})
            cluster.store.delete("v1", "ConfigMap", "default", "new")
            events = []
            async with watch.Watch() as w:
                async for event in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv,
                                            timeout_seconds=1):
                    events.append((event["type"], event["object"].metadata.name))
            assert events == [("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "new")]

    run(go())


def test_watch_without_version_starts_with_current_objects_and_sends_bookmarks(cluster):
    cluster.store.create(configmap("a", labels={"w": "1"}))
    cluster.store.create(configmap("b"))
    cluster.bookmark_interval = 0.2

    async def go():
        async with api_client(cluster) as api:
            response = await api.call_api(
                "/api/v1/namespaces/default/configmaps", "GET",
                query_params=[("watch", "true"), ("labelSelector", "w=1"), ("allowWatchBookmarks", "true"),
                              ("timeoutSeconds", "1")],
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                _preload_content=False)
            lines = [json.loads(line) for line in (await response.read()).decode().splitlines() if line]
            types = [e["type"] for e in lines]
            assert types[0] == "ADDED" and lines[0]["object"]["metadata"]["name"] == "a"
            assert "BOOKMARK" in types
            bookmark = next(e for e in lines if e["type"] == "BOOKMARK")
            assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= int(
                lines[0]["object"]["metadata"]["resourceVersion"])

    run(go())


def test_watch_from_compacted_version_is_410_gone(cluster):
    cluster.store.create(configmap("a"))
    stale = cluster.store.resource_version
    cluster.store.create(configmap("b"))
    cluster.store.compact()

    async def go():
        async with api_client(cluster) as api:
            response = await api.call_api(
                "/api/v1/namespaces/default/configmaps", "GET",
                query_params=[("watch", "true"), ("resourceVersion", stale)],
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                _preload_content=False, _return_http_data_only=False)
            assert response.status == 410
            body = json.loads(await response.read())
            assert body["reason"] == "Expired" and body["code"] == 410

    run(go())


# -- custom resources --------------------------------------------------------------------------------------------

def test_custom_resource_schema_validation_defaults_and_pruning(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            custom = client.CustomObjectsApi(api)
            bad = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                   "spec": {"queueingStrategy": "Random", "resourceGroups": [
                       {"coveredResources": ["cpu"], "flavors": [
                           {"name": "default", "resources": [{"name": "cpu", "nominalQuota": [1]}]}]}]}}
            body = await expect_api_error(custom.create_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", bad), 422)
            causes = {c["field"]: c for c in body["details"]["causes"]}
            assert causes["spec.queueingStrategy"]["reason"] == "FieldValueNotSupported"
            assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in causes
            assert body["message"].startswith('ClusterQueue.kueue.x-k8s.io "cq" is invalid')
            good = {**bad, "spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8},
                                                  {"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}],
                "unknownField": True}}
            created = await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", good)
            assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"
            assert "unknownField" not in created["spec"]
            strict = {**good, "metadata": {"name": "cq2"}}
            await expect_api_error(api.call_api(
                "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", "POST", query_params=[("fieldValidation", "Strict")],
                header_params={"Content-Type": "application/json", "Accept": "application/json"}, body=strict,
                auth_settings=["BearerToken"], _return_http_data_only=True), 400)
            rayjob = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"},
                      "spec": {"entrypoint": "python x.py", "shutdownAfterJobFinishes": "yes"}}
            body = await expect_api_error(custom.create_namespaced_custom_object(
                "ray.io", "v1", "default", "rayjobs", rayjob), 422)
            assert any(c["field"] == "spec.shutdownAfterJobFinishes" for c in body["details"]["causes"])

    run(go())


def test_creating_a_crd_serves_every_version(cluster):
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                    "versions": [
                        {"name": "v1alpha1", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"spec": {"type": "object",
                                                                      "x-kubernetes-preserve-unknown-fields": True}}}}},
                        {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                         "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                             "spec": {"type": "object", "required": ["size"], "properties": {
                                 "size": {"x-kubernetes-int-or-string": True},
                                 "color": {"type": "string", "default": "blue"}}},
                             "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            ext = client.ApiextensionsV1Api(api)
            await ext.create_custom_resource_definition(crd)
            got = await ext.read_custom_resource_definition("widgets.example.com")
            assert any(c.type == "Established" and c.status == "True" for c in got.status.conditions)
            custom = client.CustomObjectsApi(api)
            w = await custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", {
                "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "10%"}})
            assert w["spec"]["color"] == "blue"
            old = await custom.get_namespaced_custom_object("example.com", "v1alpha1", "default", "widgets", "w")
            assert old["apiVersion"] == "example.com/v1alpha1"
            body = await expect_api_error(custom.create_namespaced_custom_object(
                "example.com", "v1", "default", "widgets", {"apiVersion": "example.com/v1", "kind": "Widget",
                                                            "metadata": {"name": "x"}, "spec": {}}), 422)
            assert body["details"]["causes"][0]["field"] == "spec.size"
            resources = await custom.get_api_resources("example.com", "v1")
            assert {r.name for r in resources.resources} == {"widgets", "widgets/status"}
            await ext.delete_custom_resource_definition("widgets.example.com")
            await expect_api_error(custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets"),
                                   404)

    run(go())


# -- logs, scale -------------------------------------------------------------------------------------------------

def test_pod_logs_options(cluster):
    cluster.store.create(pod("p", containers=["main", "side"]))
    for i in range(5):
        cluster.logs.append("default", "p", "main", f"line {i}")
    cluster.logs.append("default", "p", "side", "side says hi")

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            body = await expect_api_error(v1.read_namespaced_pod_log("p", "default"), 400)
            assert "a container name must be specified" in body["message"]
            assert await v1.read_namespaced_pod_log("p", "default", container="side") == "side says hi\n"
            tail = await v1.read_namespaced_pod_log("p", "default", container="main", tail_lines=2)
            assert tail == "line 3\nline 4\n"
            stamped = await v1.read_namespaced_pod_log("p", "default", container="main", timestamps=True,
                                                       tail_lines=1)
            assert stamped.startswith("2026-01-01T00:00:00.") and stamped.endswith("Z line 4\n")
            limited = await v1.read_namespaced_pod_log("p", "default", container="main", limit_bytes=10)
            assert limited == "line 0\nlin"
            await expect_api_error(v1.read_namespaced_pod_log("p", "default", container="main", previous=True), 400)
            cluster.logs.restart("default", "p", "main")
            cluster.logs.append("default", "p", "main", "after restart")
            assert await v1.read_namespaced_pod_log("p", "default", container="main", previous=True,
                                                    tail_lines=1) == "line 4\n"
            assert await v1.read_namespaced_pod_log("p", "default", container="main") == "after restart\n"

    run(go())


def test_pod_logs_follow_streams_until_the_container_ends(cluster):
    cluster.store.create(pod("p"))
    cluster.logs.append("default", "p", "main", "first")

    async def go():
        import asyncio

        async with api_client(cluster) as api:
            response = await api.call_api(
                "/api/v1/namespaces/default/pods/p/log", "GET", query_params=[("follow", "true")],
                header_params={"Accept": "*/*"}, auth_settings=["BearerToken"], _preload_content=False)
            first = await response.content.readline()
            assert first == b"first\n"
            cluster.logs.append("default", "p", "main", "second")
            second = await asyncio.wait_for(response.content.readline(), 5)
            assert second == b"second\n"
            cluster.logs.mark_terminated("default", "p", "main")
            rest = await asyncio.wait_for(response.content.read(), 5)
            assert rest == b""

    run(go())


def _running(name, container="main"):
    """A pod whose container runs (as a kubelet would report it), with no controllers to move it on."""
    obj = pod(name)
    obj["spec"]["nodeName"] = "node-1"
    return obj


def _set_container_state(cluster, name, state):
    current = cluster.store.get("v1", "Pod", "default", name)
    phase = "Running" if "running" in state else "Succeeded"
    current["status"] = {"phase": phase, "containerStatuses": [
        {"name": "main", "image": "busybox:1.36", "imageID": "", "ready": phase == "Running", "restartCount": 0,
         "state": state}]}
    cluster.store.update_status(current)


def test_pod_logs_follow_waits_for_the_first_line_of_a_quiet_container(cluster):
    """A running container that has written nothing yet keeps a followed log open until it writes or ends."""
    cluster.store.create(_running("quiet"))
    _set_container_state(cluster, "quiet", {"running": {"startedAt": "2026-01-01T00:00:00Z"}})

    async def go():
        import asyncio

        async with api_client(cluster) as api:
            response = await api.call_api(
                "/api/v1/namespaces/default/pods/quiet/log", "GET", query_params=[("follow", "true")],
                header_params={"Accept": "*/*"}, auth_settings=["BearerToken"], _preload_content=False)
            cluster.logs.append("default", "quiet", "main", "late first line")
            first = await asyncio.wait_for(response.content.readline(), 5)
            assert first == b"late first line\n"
            cluster.logs.mark_terminated("default", "quiet", "main")
            assert await asyncio.wait_for(response.content.read(), 5) == b""

    run(go())


def test_pod_logs_follow_of_a_quiet_container_ends_when_it_terminates(cluster):
    cluster.store.create(_running("silent"))
    _set_container_state(cluster, "silent", {"running": {"startedAt": "2026-01-01T00:00:00Z"}})

    async def go():
        import asyncio

        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            response = await api.call_api(
                "/api/v1/namespaces/default/pods/silent/log", "GET", query_params=[("follow", "true")],
                header_params={"Accept": "*/*"}, auth_settings=["BearerToken"], _preload_content=False)
            # still open: a line written now reaches the follower
            cluster.logs.append("default", "silent", "main", "")
            assert await asyncio.wait_for(response.content.readline(), 5) == b"\n"
            _set_container_state(cluster, "silent", {"terminated": {"exitCode": 0, "reason": "Completed"}})
            cluster.logs.mark_terminated("default", "silent", "main")
            assert await asyncio.wait_for(response.content.read(), 5) == b""
            # a container that ended without a line, its log never written: following it ends at once
            cluster.store.create(_running("done"))
            _set_container_state(cluster, "done", {"terminated": {"exitCode": 0, "reason": "Completed"}})
            follow = await client.CoreV1Api(api).read_namespaced_pod_log("done", "default", follow=True)
            assert follow == ""

    run(go())


def test_deployment_scale_subresource(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            apps = client.AppsV1Api(api)
            await apps.create_namespaced_deployment("default", {
                "metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                                                      "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                                                          "containers": [{"name": "w", "image": "nginx"}]}}}})
            scale = await apps.read_namespaced_deployment_scale("web", "default")
            assert scale.spec.replicas == 1 and scale.status.selector == "app=web"
            await apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
            deployment = await apps.read_namespaced_deployment("web", "default")
            assert deployment.spec.replicas == 4 and deployment.metadata.generation == 2
            await expect_api_error(apps.patch_namespaced_deployment_scale(
                "web", "default", {"spec": {"replicas": -1}}), 422)

    run(go())
