"""The Portal's ClusterRole is read-only, and it is all the Portal needs (every other test runs as it)."""

from __future__ import annotations

from tau_core.kube import KubeApiError, KubeSession, api_path
from tau_core.kube import run as run_async

READ = {"get", "list", "watch"}


def test_the_manifest_grants_no_write_verb(portal_identity) -> None:
    _, objects = portal_identity
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= READ and "*" not in verbs
    assert all("*" not in rule["resources"] and "*" not in rule["apiGroups"] for rule in role["rules"])
    binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tau-portal", "namespace": "tau-system"}]


def test_the_role_reads_what_the_portal_watches_and_cannot_write(portal_identity, make_job) -> None:
    from taugrid_portal.portal.cache import KINDS

    kubeconfig, _ = portal_identity

    async def probe() -> dict[str, object]:
        out: dict[str, object] = {}
        async with await KubeSession.connect(kubeconfig=str(kubeconfig)) as session:
            for kind in KINDS:
                await session.list(api_path(kind.api_version, kind.plural))
                out[kind.key] = "ok"
            for name, call in {
                "create job": lambda: session.create(api_path("batch/v1", "jobs", namespace="aurora"),
                                                     make_job("forbidden")),
                "delete node": lambda: session.delete(api_path("v1", "nodes", name="cpu-node-1"), missing_ok=False),
                "patch workload list": lambda: session.patch(
                    api_path("v1", "pods", namespace="aurora", name="x"), {"metadata": {"labels": {"a": "b"}}}),
                "read secrets": lambda: session.list(api_path("v1", "secrets", namespace="aurora")),
            }.items():
                try:
                    await call()
                    out[name] = "allowed"
                except KubeApiError as exc:
                    out[name] = exc.status
        return out

    result = run_async(probe)
    assert all(result[k.key] == "ok" for k in KINDS)
    assert result["create job"] == 403 and result["delete node"] == 403 and result["read secrets"] == 403
    assert result["patch workload list"] == 403
