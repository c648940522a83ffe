"""API-server semantics of the simulated cluster, exercised through kubernetes-asyncio over real HTTP."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tau_testing.sim.client import api_client, configmap, expect_api_error, pod, run


@pytest.fixture
def cluster(sim_cluster_factory):
    return sim_cluster_factory(controllers=False)


# -- discovery ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["1.29", "1.31"])
def test_version_is_configurable(sim_cluster_factory, version):
    cluster = sim_cluster_factory(controllers=False, kubernetes_version=version)

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            info = await client.VersionApi(api).get_code()
            assert (info.major, info.minor) == ("1", version.split(".")[1])
            assert info.git_version == f"v{version}.0"

    run(go())


def test_discovery_lists_groups_resources_and_subresources(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            core = await client.CoreV1Api(api).get_api_resources()
            by_name = {r.name: r for r in core.resources}
            assert by_name["pods"].namespaced and by_name["pods"].kind == "Pod"
            assert "po" in by_name["pods"].short_names
            assert {"pods/log", "pods/status"} <= set(by_name)
            assert by_name["namespaces"].namespaced is False
            assert set(by_name["pods"].verbs) >= {"create", "get", "list", "watch", "patch", "delete"}
            groups = {g.name: g for g in (await client.ApisApi(api).get_api_versions()).groups}
            for name in ("batch", "apps", "rbac.authorization.k8s.io", "authorization.k8s.io", "scheduling.k8s.io",
                         "coordination.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
                         "kueue.x-k8s.io", "ray.io"):
                assert name in groups, name
            assert {v.version for v in groups["kueue.x-k8s.io"].versions} == {"v1beta1", "v1beta2"}
            apps = await client.AppsV1Api(api).get_api_resources()
            scale = next(r for r in apps.resources if r.name == "deployments/scale")
            assert scale.kind == "Scale" and scale.group == "autoscaling"
            kueue = await client.CustomObjectsApi(api).get_api_resources("kueue.x-k8s.io", "v1beta2")
            cq = next(r for r in kueue.resources if r.name == "clusterqueues")
            assert cq.namespaced is False and cq.kind == "ClusterQueue"
            assert any(r.name == "workloads/status" for r in kueue.resources)

    run(go())


def test_kubeconfig_is_private_and_names_users(cluster):
    mode = stat.S_IMODE(os.stat(cluster.kubeconfig_path).st_mode)
    assert mode == 0o600
    config = cluster.kubeconfig()
    assert {u["name"] for u in config["users"]} >= {"admin", "alice", "bob"}
    assert config["current-context"] == "tau-sim"


# -- create / get ------------------------------------------------------------------------------------------------

def test_create_sets_metadata_and_conflicts_on_duplicates(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            created = await v1.create_namespaced_config_map("default", configmap("one"))
            meta = created.metadata
            assert meta.uid and meta.resource_version and meta.creation_timestamp is not None
            body = await expect_api_error(v1.create_namespaced_config_map("default", configmap("one")), 409)
            assert body["reason"] == "AlreadyExists" and body["details"]["name"] == "one"
            generated = await v1.create_namespaced_config_map(
                "default", {"metadata": {"generateName": "gen-"}, "data": {}})
            assert generated.metadata.name.startswith("gen-") and len(generated.metadata.name) == 9
            job = await client.BatchV1Api(api).create_namespaced_job("default", {
                "metadata": {"name": "j"}, "spec": {"template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
            assert job.metadata.generation == 1
            assert job.spec.backoff_limit == 6 and job.spec.completions == 1

    run(go())


def test_get_missing_returns_status_404(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            body = await expect_api_error(client.CoreV1Api(api).read_namespaced_pod("ghost", "default"), 404)
            assert body["reason"] == "NotFound"
            assert body["message"] == 'pods "ghost" not found'
            assert body["details"] == {"name": "ghost", "kind": "pods"}
            body = await expect_api_error(client.BatchV1Api(api).read_namespaced_job("ghost", "default"), 404)
            assert body["message"] == 'jobs.batch "ghost" not found'
            await expect_api_error(client.CoreV1Api(api).create_namespaced_config_map("nowhere", configmap("x", "nowhere")),
                                   404)

    run(go())


def test_invalid_builtin_object_is_422_with_causes(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            bad = {"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}
            body = await expect_api_error(client.CoreV1Api(api).create_namespaced_pod("default", bad), 422)
            fields = {c["field"] for c in body["details"]["causes"]}
            assert {"metadata.name", "spec.containers"} <= fields
            assert body["reason"] == "Invalid"

    run(go())


# -- list --------------------------------------------------------------------------------------------------------

def test_label_and_field_selectors(cluster):
    store = cluster.store
    store.create(pod("a", labels={"app": "web", "tier": "front"}))
    store.create(pod("b", labels={"app": "web", "tier": "back"}))
    store.create(pod("c", labels={"app": "db"}))
    store.create(pod("d", labels={}, nodeName="node-1"))
    running = store.get("v1", "Pod", "default", "b")
    store.update_status({**running, "status": {"phase": "Running"}})

    async def names(**kwargs):
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            result = await client.CoreV1Api(api).list_namespaced_pod("default", **kwargs)
            return sorted(p.metadata.name for p in result.items)

    async def go():
        assert await names(label_selector="app=web") == ["a", "b"]
        assert await names(label_selector="app==web,tier!=front") == ["b"]
        assert await names(label_selector="app!=web") == ["c", "d"]
        assert await names(label_selector="tier in (front, back)") == ["a", "b"]
        assert await names(label_selector="app notin (web)") == ["c", "d"]
        assert await names(label_selector="tier") == ["a", "b"]
        assert await names(label_selector="!tier") == ["c", "d"]
        assert await names(field_selector="metadata.name=c") == ["c"]
        assert await names(field_selector="metadata.namespace=default,metadata.name!=a") == ["b", "c", "d"]
        assert await names(field_selector="status.phase=Running") == ["b"]
        assert await names(field_selector="spec.nodeName=node-1") == ["d"]
        assert await names(field_selector="spec.nodeName=") == ["a", "b", "c"]
        async with api_client(cluster) as api:
            from kubernetes_asyncio import client

            body = await expect_api_error(client.CoreV1Api(api).list_namespaced_pod(
                "default", field_selector="spec.bogus=1"), 400)
            assert "spec.bogus" in body["message"]

    run(go())


def test_limit_and_continue_pages_through_a_list(cluster):
    for i in range(7):
        cluster.store.create(configmap(f"cm-{i}"))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            seen, token, pages = [], None, 0
            while True:
                page = await v1.list_namespaced_config_map("default", limit=3, _continue=token)
                pages += 1
                seen += [c.metadata.name for c in page.items]
                token = page.metadata._continue
                if not token:
                    break
                assert page.metadata.remaining_item_count > 0
            assert pages == 3 and seen == [f"cm-{i}" for i in range(7)]
            cluster.store.compact()
            first = await v1.list_namespaced_config_map("default", limit=3)
            cluster.store.create(configmap("later"))
            cluster.store.compact()
            body = await expect_api_error(v1.list_namespaced_config_map(
                "default", limit=3, _continue=first.metadata._continue), 410)
            assert body["reason"] == "Expired"

    run(go())


# -- update / patch ----------------------------------------------------------------------------------------------

def test_update_with_stale_resource_version_conflicts(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            cm = await v1.create_namespaced_config_map("default", configmap("cfg"))
            cm.data = {"k": "v2"}
            fresh = await v1.replace_namespaced_config_map("cfg", "default", cm)
            assert int(fresh.metadata.resource_version) > int(cm.metadata.resource_version)
            cm.data = {"k": "v3"}
            body = await expect_api_error(v1.replace_namespaced_config_map("cfg", "default", cm), 409)
            assert body["reason"] == "Conflict" and "the object has been modified" in body["message"]
            assert (await v1.read_namespaced_config_map("cfg", "default")).data == {"k": "v2"}

    run(go())


def test_merge_strategic_and_json_patches(cluster):
    cluster.store.create({**pod("p", labels={"a": "1"}), "spec": {"containers": [
        {"name": "main", "image": "busybox:1", "env": [{"name": "A", "value": "1"}]},
        {"name": "side", "image": "sidecar:1"}]}})

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            merged = await v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": None, "b": "2"}}},
                                                   _content_type="application/merge-patch+json")
            assert merged.metadata.labels == {"b": "2"}
            smp = await v1.patch_namespaced_pod("p", "default", {"spec": {"containers": [
                {"name": "main", "image": "busybox:2"}]}}, _content_type="application/strategic-merge-patch+json")
            by_name = {c.name: c for c in smp.spec.containers}
            assert by_name["main"].image == "busybox:2" and by_name["side"].image == "sidecar:1"
            body = await expect_api_error(v1.patch_namespaced_pod("p", "default", {"spec": {"containers": [
                {"name": "main", "env": [{"name": "B", "value": "2"}]}]}},
                _content_type="application/strategic-merge-patch+json"), 422)
            assert body["details"]["causes"][0]["field"] == "spec"
            apps = client.AppsV1Api(api)
            template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [
                {"name": "main", "image": "busybox:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "sidecar:1"}]}}
            await apps.create_namespaced_deployment("default", {"metadata": {"name": "w"}, "spec": {
                "selector": {"matchLabels": {"app": "w"}}, "template": template}})
            deployment = await apps.patch_namespaced_deployment("w", "default", {"spec": {"template": {"spec": {
                "containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]},
                               {"name": "side", "$patch": "delete"}]}}}})
            containers = deployment.spec.template.spec.containers
            assert [c.name for c in containers] == ["main"] and containers[0].image == "busybox:1"
            assert [e.name for e in containers[0].env] == ["A", "B"]
            patched = await v1.patch_namespaced_pod("p", "default", [
                {"op": "test", "path": "/metadata/labels/b", "value": "2"},
                {"op": "add", "path": "/metadata/labels/c", "value": "3"},
                {"op": "remove", "path": "/metadata/labels/b"}], _content_type="application/json-patch+json")
            assert patched.metadata.labels == {"c": "3"}
            body = await expect_api_error(v1.patch_namespaced_pod("p", "default", [
                {"op": "test", "path": "/metadata/labels/c", "value": "nope"}],
                _content_type="application/json-patch+json"), 422)
            assert "test failed" in body["message"]
            custom = client.CustomObjectsApi(api)
            await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}})
            await expect_api_error(api.call_api(
                "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/rf", "PATCH",
                header_params={"Content-Type": "application/strategic-merge-patch+json", "Accept": "application/json"},
                body={"spec": {}}, auth_settings=["BearerToken"], _return_http_data_only=True), 415)

    run(go())


# -- delete ------------------------------------------------------------------------------------------------------

def test_finalizers_hold_deletion_with_deletion_timestamp(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            await v1.create_namespaced_config_map("default", configmap("held", finalizers=["example.com/hold"]))
            await v1.delete_namespaced_config_map("held", "default")
            held = await v1.read_namespaced_config_map("held", "default")
            assert held.metadata.deletion_timestamp is not None
            body = await expect_api_error(v1.patch_namespaced_config_map(
                "held", "default", {"metadata": {"finalizers": ["example.com/hold", "new"]}}), 422)
            assert "no new finalizers" in body["message"]
            await v1.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
            await expect_api_error(v1.read_namespaced_config_map("held", "default"), 404)

    run(go())


def _owner_with_children(cluster, name):
    owner = cluster.store.create(configmap(name))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    for i in range(2):
        cluster.store.create(configmap(f"{name}-child-{i}", ownerReferences=[ref]))
    return owner


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
def test_owner_reference_garbage_collection(cluster, policy):
    owner = _owner_with_children(cluster, "owner")
    cluster.store.create(configmap("held-child", finalizers=["example.com/hold"], ownerReferences=[{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True}]))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            await v1.delete_namespaced_config_map("owner", "default", propagation_policy=policy)
            names = sorted(c.metadata.name for c in (await v1.list_namespaced_config_map("default")).items)
            if policy == "Orphan":
                assert names == ["held-child", "owner-child-0", "owner-child-1"]
                child = await v1.read_namespaced_config_map("owner-child-0", "default")
                assert not child.metadata.owner_references
            elif policy == "Background":
                assert names == ["held-child"]
                held = await v1.read_namespaced_config_map("held-child", "default")
                assert held.metadata.deletion_timestamp is not None
            else:
                # foreground: the owner waits, marked, until the finalizer-held child is gone
                assert names == ["held-child", "owner"]
                waiting = await v1.read_namespaced_config_map("owner", "default")
                assert "foregroundDeletion" in waiting.metadata.finalizers
                assert waiting.metadata.deletion_timestamp is not None
                await v1.patch_namespaced_config_map("held-child", "default", {"metadata": {"finalizers": None}})
                assert [c.metadata.name for c in (await v1.list_namespaced_config_map("default")).items] == []

    run(go())


def test_job_delete_without_policy_orphans_pods_with_a_warning(cluster):
    job = cluster.store.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    cluster.store.create({**pod("j-pod"), "metadata": {"name": "j-pod", "namespace": "default", "ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job["metadata"]["uid"], "controller": True}]}})

    async def go():
        async with api_client(cluster) as api:
            response = await api.call_api("/apis/batch/v1/namespaces/default/jobs/j", "DELETE",
                                          header_params={"Accept": "application/json"},
                                          auth_settings=["BearerToken"], _preload_content=False)
            warning = response.headers.get("Warning", "")
            assert "child pods are preserved" in warning
            assert cluster.store.get("v1", "Pod", "default", "j-pod") is not None

    run(go())


def test_uid_precondition_and_deletecollection(cluster):
    cluster.store.create(configmap("x", labels={"group": "g"}))
    cluster.store.create(configmap("y", labels={"group": "g"}))
    cluster.store.create(configmap("z"))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            body = await expect_api_error(v1.delete_namespaced_config_map(
                "x", "default", body={"preconditions": {"uid": "not-the-uid"}}), 409)
            assert "Precondition failed" in body["message"]
            await v1.delete_collection_namespaced_config_map("default", label_selector="group=g")
            assert [c.metadata.name for c in (await v1.list_namespaced_config_map("default")).items] == ["z"]

    run(go())


def test_namespace_deletion_removes_its_content(cluster):
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "temp"}})
    cluster.store.create(configmap("a", "temp"))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            await v1.delete_namespace("temp")
            await expect_api_error(v1.read_namespace("temp"), 404)
            assert cluster.store.get("v1", "ConfigMap", "temp", "a") is None

    run(go())


# -- status subresource, generation ------------------------------------------------------------------------------

def test_status_subresource_keeps_spec_and_status_apart(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            batch = client.BatchV1Api(api)
            job = await batch.create_namespaced_job("default", {
                "metadata": {"name": "j"}, "spec": {"suspend": True, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
                "status": {"active": 5}})
            assert job.status is None or not job.status.active
            updated = await batch.patch_namespaced_job_status("j", "default", {
                "spec": {"parallelism": 9}, "status": {"active": 2}})
            assert updated.status.active == 2 and updated.spec.parallelism == 1
            assert updated.metadata.generation == 1
            respec = await batch.patch_namespaced_job("j", "default", {"spec": {"parallelism": 3},
                                                                       "status": {"active": 0}})
            assert respec.spec.parallelism == 3 and respec.status.active == 2
            assert respec.metadata.generation == 2
            labels = await batch.patch_namespaced_job("j", "default", {"metadata": {"labels": {"x": "y"}}})
            assert labels.metadata.generation == 2

    run(go())


# -- dry run -----------------------------------------------------------------------------------------------------

def test_dry_run_validates_and_defaults_but_never_stores(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            before = cluster.store.resource_version
            created = await v1.create_namespaced_pod("default", pod("dry"), dry_run="All")
            assert created.spec.restart_policy == "Always" and created.status.phase == "Pending"
            await expect_api_error(v1.read_namespaced_pod("dry", "default"), 404)
            await expect_api_error(v1.create_namespaced_pod("default", {"metadata": {"name": "x"}, "spec": {}},
                                                            dry_run="All"), 422)
            cluster.store.create(configmap("keep"))
            await v1.delete_namespaced_config_map("keep", "default", dry_run="All")
            await v1.patch_namespaced_config_map("keep", "default", {"data": {"k": "changed"}}, dry_run="All")
            assert cluster.store.get("v1", "ConfigMap", "default", "keep")["data"] == {"k": "v"}
            assert int(cluster.store.resource_version) == int(before) + 1

    run(go())


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


# -- authentication and RBAC -------------------------------------------------------------------------------------

def test_bad_token_is_401_with_status(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            api.configuration.api_key = {"BearerToken": "Bearer not-a-token"}
            api.configuration.api_key_prefix = {}
            body = await expect_api_error(client.CoreV1Api(api).list_namespace(), 401)
            assert body["reason"] == "Unauthorized"

    run(go())


def test_rbac_denies_until_a_binding_allows(cluster):
    store = cluster.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    store.create(pod("p", "team-a"))
    store.create(pod("q", "team-a"))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster, "alice") as api:
            v1 = client.CoreV1Api(api)
            body = await expect_api_error(v1.list_namespaced_pod("team-a"), 403)
            assert body["reason"] == "Forbidden"
            assert body["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
                                       'in the namespace "team-a"')
            store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                          "metadata": {"name": "pod-reader", "namespace": "team-a"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                                    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"],
                                     "resourceNames": ["p"]}]})
            store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "team-a-readers", "namespace": "team-a"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                          "subjects": [{"kind": "Group", "name": "team-a"}]})
            assert len((await v1.list_namespaced_pod("team-a")).items) == 2
            await expect_api_error(v1.list_namespaced_pod("default"), 403)
            body = await expect_api_error(v1.delete_namespaced_pod("p", "team-a"), 403)
            assert body["message"].startswith('pods "p" is forbidden: User "alice" cannot delete resource "pods"')
            cluster.logs.append("team-a", "p", "main", "hello")
            cluster.logs.append("team-a", "q", "main", "hello")
            assert await v1.read_namespaced_pod_log("p", "team-a") == "hello\n"
            body = await expect_api_error(v1.read_namespaced_pod_log("q", "team-a"), 403)
            assert 'cannot get resource "pods/log"' in body["message"]
            await expect_api_error(client.BatchV1Api(api).list_namespaced_job("team-a"), 403)
        async with api_client(cluster, "bob") as api:
            await expect_api_error(client.CoreV1Api(api).list_namespaced_pod("team-a"), 403)
        store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                      "metadata": {"name": "bob-edit", "namespace": "team-a"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                      "subjects": [{"kind": "User", "name": "bob"}]})
        async with api_client(cluster, "bob") as api:
            await client.BatchV1Api(api).list_namespaced_job("team-a")
            await expect_api_error(client.CoreV1Api(api).list_namespace(), 403)

    run(go())


def test_self_subject_access_review(cluster):
    cluster.store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                          "metadata": {"name": "team-a-view"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                          "subjects": [{"kind": "Group", "name": "team-a"}]})

    async def can(user, **attrs):
        from kubernetes_asyncio import client

        async with api_client(cluster, user) as api:
            review = await client.AuthorizationV1Api(api).create_self_subject_access_review(
                {"spec": {"resourceAttributes": attrs}})
            return review.status.allowed

    async def go():
        assert await can("alice", verb="list", resource="pods", namespace="default")
        assert not await can("alice", verb="delete", resource="pods", namespace="default")
        assert not await can("bob", verb="list", resource="pods", namespace="default")
        assert await can("admin", verb="delete", resource="nodes")
        assert await can("alice", verb="create", group="authorization.k8s.io", resource="selfsubjectaccessreviews")

    run(go())


# -- faults and counters -----------------------------------------------------------------------------------------

def test_injected_faults_and_request_counts(cluster):
    async def go():
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            fault = cluster.faults.add(method="GET", path_regex=r"/namespaces/default/configmaps$", status=503,
                                       count=2)
            for _ in range(2):
                body = await expect_api_error(v1.list_namespaced_config_map("default"), 503)
                assert body["reason"] == "ServiceUnavailable"
            await v1.list_namespaced_config_map("default")
            assert fault.fired == 2
            cluster.faults.add(path_regex="/pods", status=429, retry_after=3, count=1)
            try:
                await v1.list_namespaced_pod("default")
            except ApiException as exc:
                assert exc.status == 429 and exc.headers["Retry-After"] == "3"
            else:
                raise AssertionError("expected 429")
            cluster.faults.drop_watches(after_events=1, count=1)
            cluster.store.create(configmap("a"))
            cluster.store.create(configmap("b"))
            response = await api.call_api(
                "/api/v1/namespaces/default/configmaps", "GET", query_params=[("watch", "true")],
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"], _preload_content=False)
            lines = (await response.read()).decode().splitlines()
            assert len(lines) == 1
        counts = cluster.requests.counts()
        assert counts[("list", "configmaps")] == 3
        assert counts[("list", "pods")] == 1
        assert counts[("watch", "configmaps")] == 1
        assert cluster.requests.count(verb="list", resource="configmaps", status=503) == 2

    run(go())


def test_store_subscribers_see_committed_changes(cluster):
    seen = []
    unsubscribe = cluster.store.subscribe(lambda kind, obj: seen.append((kind, obj["metadata"]["name"])))
    cluster.store.create(configmap("s"))
    cluster.store.patch("v1", "ConfigMap", "default", "s", {"data": {"k": "2"}})
    cluster.store.patch("v1", "ConfigMap", "default", "s", {"data": {"k": "2"}})  # no-op: no event
    cluster.store.delete("v1", "ConfigMap", "default", "s")
    unsubscribe()
    cluster.store.create(configmap("t"))
    assert seen == [("ADDED", "s"), ("MODIFIED", "s"), ("DELETED", "s")]


def test_watch_with_selector_sees_objects_enter_and_leave(cluster):
    cluster.store.create(configmap("m"))
    start = cluster.store.resource_version
    cluster.store.patch("v1", "ConfigMap", "default", "m", {"metadata": {"labels": {"sel": "yes"}}})
    cluster.store.patch("v1", "ConfigMap", "default", "m", {"data": {"k": "2"}})
    cluster.store.patch("v1", "ConfigMap", "default", "m", {"metadata": {"labels": {"sel": "no"}}})

    async def go():
        from kubernetes_asyncio import client, watch

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            events = []
            async with watch.Watch() as w:
                async for event in w.stream(v1.list_namespaced_config_map, "default", resource_version=start,
                                            label_selector="sel=yes", timeout_seconds=1):
                    events.append(event["type"])
            assert events == ["ADDED", "MODIFIED", "DELETED"]

    run(go())


def test_event_field_selectors(cluster):
    target = cluster.store.create(pod("p"))
    cluster.event(target, "Scheduled", "Successfully assigned default/p to node-1")
    cluster.event(cluster.store.create(pod("q")), "FailedScheduling", "0/1 nodes are available", "Warning")

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            events = await client.CoreV1Api(api).list_namespaced_event(
                "default", field_selector="involvedObject.kind=Pod,involvedObject.name=p")
            assert [e.reason for e in events.items] == ["Scheduled"]
            warnings = await client.CoreV1Api(api).list_namespaced_event("default", field_selector="type=Warning")
            assert [e.involved_object.name for e in warnings.items] == ["q"]

    run(go())


def test_server_side_apply_owns_removes_and_conflicts(cluster):
    async def apply(api, config, manager, force=False):
        query = ([("fieldManager", manager)] if manager else []) + ([("force", "true")] if force else [])
        response = await api.call_api(
            "/api/v1/namespaces/default/configmaps/ssa", "PATCH", query_params=query,
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=config, auth_settings=["BearerToken"], _preload_content=False)
        return response.status, json.loads(await response.read())

    def config(**data):
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "labels": {"app": "x"}},
                "data": data}

    async def go():
        async with api_client(cluster) as api:
            status, created = await apply(api, config(a="1", b="2"), "one")
            assert status == 200 and created["data"] == {"a": "1", "b": "2"}
            assert created["metadata"]["managedFields"][0]["manager"] == "one"
            _, same = await apply(api, config(a="1", b="2"), "one")
            assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
            _, trimmed = await apply(api, config(a="1"), "one")
            assert trimmed["data"] == {"a": "1"}
            await apply(api, config(c="3"), "two")
            status, body = await apply(api, config(a="changed"), "two")
            assert status == 409 and body["reason"] == "Conflict"
            assert body["details"]["causes"][0]["field"] == ".data.a"
            _, forced = await apply(api, config(a="changed"), "two", force=True)
            assert forced["data"] == {"a": "changed"}  # "two" dropped c from its configuration
            status, body = await apply(api, config(), None)
            assert status == 422 and "fieldManager" in body["message"]

    run(go())


def test_custom_resource_status_writes_are_validated_and_pruned(cluster):
    cluster.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            custom = client.CustomObjectsApi(api)
            body = await expect_api_error(custom.patch_namespaced_custom_object_status(
                "kueue.x-k8s.io", "v1beta2", "default", "localqueues", "lq",
                {"status": {"pendingWorkloads": "many"}}, _content_type="application/merge-patch+json"), 422)
            assert body["details"]["causes"][0]["field"] == "status.pendingWorkloads"
            ok = await custom.patch_namespaced_custom_object_status(
                "kueue.x-k8s.io", "v1beta2", "default", "localqueues", "lq",
                {"status": {"pendingWorkloads": 2, "madeUp": True}}, _content_type="application/merge-patch+json")
            assert ok["status"]["pendingWorkloads"] == 2 and "madeUp" not in ok["status"]

    run(go())


def test_crd_cel_rules_are_enforced(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            custom = client.CustomObjectsApi(api)

            def queue(covered):
                return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                        "spec": {"resourceGroups": [{"coveredResources": covered, "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}

            body = await expect_api_error(custom.create_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", queue(["cpu", "memory"])), 422)
            cause = body["details"]["causes"][0]
            assert cause["field"] == "spec.resourceGroups[0]"
            assert "flavors must have the same number of resources as the coveredResources" in cause["message"]
            await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", queue(["cpu"]))
            await custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
                "spec": {"clusterQueue": "cq"}})
            body = await expect_api_error(custom.patch_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", "default", "localqueues", "lq", {"spec": {"clusterQueue": "other"}},
                _content_type="application/merge-patch+json"), 422)
            assert body["details"]["causes"][0]["field"] == "spec.clusterQueue"
            assert "field is immutable" in body["message"]

    run(go())


def test_gated_pod_may_gain_scheduling_directives_and_nothing_else(cluster):
    """Kubernetes >= 1.27: while a pod has schedulingGates, nodeSelector may gain entries, required node
    affinity terms may gain requirements (preferred terms are free) and tolerations may be added; any other
    spec change, and the same changes on an ungated pod, are 422."""
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    gated = pod("gated", nodeSelector={"pool": "x"}, schedulingGates=[{"name": "example.com/hold"}],
                tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term]}}})
    cluster.store.create(gated)
    cluster.store.create(pod("free", nodeSelector={"pool": "x"}))

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)

            async def patch(name, body, expect=None):
                call = v1.patch_namespaced_pod(name, "default", body,
                                               _content_type="application/strategic-merge-patch+json")
                if expect is None:
                    return await call
                return await expect_api_error(call, expect)

            narrowed = {"matchExpressions": [*term["matchExpressions"],
                                             {"key": "gpu", "operator": "Exists"}]}
            updated = await patch("gated", {"spec": {
                "nodeSelector": {"gpu-class": "a100"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"},
                                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [narrowed]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [
                            {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}})
            assert updated.spec.node_selector == {"pool": "x", "gpu-class": "a100"}
            assert len(updated.spec.tolerations) == 2
            assert len(updated.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
                       .node_selector_terms[0].match_expressions) == 2

            body = await patch("gated", {"spec": {"nodeSelector": {"pool": "y"}}}, 422)
            assert body["details"]["causes"][0]["field"] == "spec.nodeSelector"
            assert "only additions to spec.nodeSelector are allowed" in body["message"]
            body = await patch("gated", {"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [narrowed, term]}}}}}, 422)
            assert "no additions/deletions to non-empty NodeSelectorTerms list are allowed" in body["message"]
            body = await patch("gated", {"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}]}}}}}, 422)
            assert "only additions are allowed (no mutations or deletions)" in body["message"]
            body = await patch("gated", {"spec": {"tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}, 422)
            assert body["details"]["causes"][0]["field"] == "spec.tolerations"
            body = await patch("gated", {"spec": {"affinity": {"podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}}}}, 422)
            assert "pod updates may not change fields other than" in body["message"]
            body = await patch("gated", {"spec": {"schedulingGates": [
                {"name": "example.com/hold"}, {"name": "example.com/more"}]}}, 422)
            assert "only deletion is allowed, but found new scheduling gate 'example.com/more'" in body["message"]
            await expect_api_error(v1.patch_namespaced_pod("gated", "default", [
                {"op": "replace", "path": "/spec/restartPolicy", "value": "Never"}],
                _content_type="application/json-patch+json"), 422)

            # ungated: the scheduling directives are fixed; tolerations may still be added
            body = await patch("free", {"spec": {"nodeSelector": {"gpu-class": "a100"}}}, 422)
            assert "pod updates may not change fields other than" in body["message"]
            await patch("free", {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}})

            # removing the gate and adding a selector entry in one update is allowed (the old pod was gated)
            ungated = await v1.patch_namespaced_pod("gated", "default", [
                {"op": "remove", "path": "/spec/schedulingGates"},
                {"op": "add", "path": "/spec/nodeSelector/zone", "value": "a"}],
                _content_type="application/json-patch+json")
            assert ungated.spec.scheduling_gates is None and ungated.spec.node_selector["zone"] == "a"
            body = await patch("gated", {"spec": {"nodeSelector": {"late": "1"}}}, 422)
            assert "pod updates may not change fields other than" in body["message"]

    run(go())


def test_builtin_objects_are_decoded_like_go_types(cluster):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": [{"name": "web", "image": "nginx", "resource": {"limits": {"cpu": "1"}}}]}}}}

    async def post(api, body, validation=None):
        query = [("fieldValidation", validation)] if validation else []
        response = await api.call_api(
            "/apis/apps/v1/namespaces/default/deployments", "POST", query_params=query,
            header_params={"Content-Type": "application/json", "Accept": "application/json"}, body=body,
            auth_settings=["BearerToken"], _preload_content=False)
        return response.status, response.headers.get("Warning", ""), json.loads(await response.read())

    async def go():
        async with api_client(cluster) as api:
            status, _, body = await post(api, deployment, "Strict")
            assert status == 400 and 'unknown field "spec.template.spec.containers[0].resource"' in body["message"]
            status, warning, body = await post(api, deployment)
            assert status == 201
            assert warning == '299 - "unknown field \\"spec.template.spec.containers[0].resource\\""'
            assert "resource" not in body["spec"]["template"]["spec"]["containers"][0]
            wrong = {**deployment, "metadata": {"name": "web2"}, "spec": {**deployment["spec"], "replicas": "3"}}
            status, _, body = await post(api, wrong)
            assert status == 400 and "spec.replicas" in body["message"]

    run(go())


def test_kueue_versions_are_converted_on_read_and_write(cluster):
    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            custom = client.CustomObjectsApi(api)
            await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", {
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                "spec": {"cohort": "org", "admissionChecks": ["prov"]}})
            new = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq")
            assert new["spec"]["cohortName"] == "org" and "cohort" not in new["spec"]
            assert new["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}]}
            old = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "cq")
            assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1" and old["spec"]["cohort"] == "org"
            await custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", "cq",
                                                     {"spec": {"cohort": "org2"}},
                                                     _content_type="application/merge-patch+json")
            stored = cluster.store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "cq")
            assert stored["spec"]["cohortName"] == "org2" and stored["metadata"]["generation"] == 2
            await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "multikueueclusters", {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
                "spec": {"clusterSource": {"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}}})
            legacy = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "multikueueclusters", "w1")
            assert legacy["spec"] == {"kubeConfig": {"location": "w1-secret", "locationType": "Secret"}}

    run(go())


GUARD_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "cm-guard"},
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
        "variables": [{"name": "privileged", "expression":
                       "request.userInfo.groups.exists(g, g in ['system:masters', 'platform-admins'])"}],
        "validations": [{
            "expression": "variables.privileged || (oldObject == null ? !has(object.metadata.annotations) || "
                          "!('example.com/approved' in object.metadata.annotations) : "
                          "(has(object.metadata.annotations) && 'example.com/approved' in "
                          "object.metadata.annotations) == (has(oldObject.metadata.annotations) && "
                          "'example.com/approved' in oldObject.metadata.annotations))",
            "message": "approval annotations are platform-owned."}],
    },
}


def test_validating_admission_policy_is_enforced_for_api_writes(cluster):
    store = cluster.store
    store.create(GUARD_POLICY)
    store.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                  "metadata": {"name": "cm-guard"},
                  "spec": {"policyName": "cm-guard", "validationActions": ["Deny"]}})
    store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                  "metadata": {"name": "alice-edit", "namespace": "default"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                  "subjects": [{"kind": "User", "name": "alice"}]})

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster, "alice") as api:
            v1 = client.CoreV1Api(api)
            await v1.create_namespaced_config_map("default", configmap("plain"))
            body = await expect_api_error(v1.create_namespaced_config_map(
                "default", configmap("sneaky", annotations={"example.com/approved": "true"})), 422)
            assert body["message"] == ('configmaps "sneaky" is forbidden: ValidatingAdmissionPolicy \'cm-guard\' '
                                       "with binding 'cm-guard' denied request: approval annotations are "
                                       "platform-owned.")
            await expect_api_error(v1.patch_namespaced_config_map(
                "plain", "default", {"metadata": {"annotations": {"example.com/approved": "true"}}}), 422)
            await v1.patch_namespaced_config_map("plain", "default", {"data": {"k": "changed"}})
        async with api_client(cluster) as api:
            await client.CoreV1Api(api).patch_namespaced_config_map(
                "plain", "default", {"metadata": {"annotations": {"example.com/approved": "true"}}})
        # the simulator's own writes (controllers, tests using the store) are not API requests
        store.create(configmap("internal", annotations={"example.com/approved": "true"}))

    run(go())


def test_faults_can_target_one_user_and_add_latency(cluster):
    cluster.faults.add(user="alice", status=500, count=1)
    cluster.faults.latency(0.05, path_regex="/namespaces$", count=1)

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster) as api:
            await client.CoreV1Api(api).list_namespace()
        async with api_client(cluster, "alice") as api:
            body = await expect_api_error(client.CoreV1Api(api).list_namespace(), 500)
            assert body["reason"] == "InternalError"

    run(go())
    assert cluster.requests.count(verb="list", resource="namespaces", user="admin", status=200) == 1


def test_dropped_watch_connection_is_cut_mid_stream(cluster):
    cluster.store.create(configmap("a"))
    cluster.store.create(configmap("b"))
    cluster.faults.drop_watches(after_events=1, count=1, reset=True)

    async def go():
        import aiohttp
        from kubernetes_asyncio import client, watch

        async with api_client(cluster) as api:
            v1 = client.CoreV1Api(api)
            seen = []
            try:
                async with watch.Watch() as w:
                    async for event in w.stream(v1.list_namespaced_config_map, "default", timeout_seconds=5):
                        seen.append(event["object"].metadata.name)
            except aiohttp.ClientPayloadError:
                pass
            else:
                raise AssertionError("the connection was not cut")
            assert seen == ["a"]
            # the next watch (the fault fired once) is whole again
            again = []
            async with watch.Watch() as w:
                async for event in w.stream(v1.list_namespaced_config_map, "default", timeout_seconds=1):
                    again.append(event["object"].metadata.name)
            assert again == ["a", "b"]

    run(go())


def test_kubernetes_asyncio_verifies_the_generated_ca(sim_cluster_factory):
    cluster = sim_cluster_factory(controllers=False, tls=True)
    assert cluster.url.startswith("https://127.0.0.1:")

    async def go():
        from kubernetes_asyncio import client

        async with api_client(cluster, "alice") as api:
            review = await client.AuthenticationV1Api(api).create_self_subject_review({})
            assert review.status.user_info.username == "alice"
            assert "team-a" in review.status.user_info.groups

    run(go())
