"""Authentication, RBAC, admission, server-side apply, decoding, version conversion and injected faults of
the simulated cluster, through kubernetes-asyncio over real HTTP."""

from __future__ import annotations

import json

from tau_testing.sim.client import api_client, configmap, expect_api_error, pod, run

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
            created = await custom.create_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", "default", "localqueues", {
                    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"},
                    "spec": {"clusterQueue": "cq"}, "status": {"pendingWorkloads": 3}})
            assert "status" not in created  # a custom resource with a status subresource answers with none
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
            assert body["details"]["causes"] == [{"message": body["message"].split(" is forbidden: ", 1)[1]}]
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
