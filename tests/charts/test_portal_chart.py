"""The Portal's pieces of taugrid-core, rendered by the real Helm (issue 14): the Deployment runs exactly the
flags `taugrid-portal portal serve` defines, ClusterIP only, its RBAC is deploy/portal/rbac.yaml, the workspace
directory is a mounted ConfigMap the Portal's own loader accepts, and Stellar's Host allowlist is the Service."""

from __future__ import annotations

import json

import pytest
import yaml

from .conftest import ROOT

DIRECTORY = {"localCluster": "local", "workspaces": [
    {"id": "aurora", "cluster": "local", "team": "vision", "namespace": "aurora", "localQueue": "jobqueue",
     "source": "local", "default": True, "authorization": {"mode": "workspace-rbac", "groups": ["g-aurora"]}}]}


def _portal(objects, kind, name="tau-portal"):
    [obj] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


@pytest.fixture(scope="module")
def managed(render, tmp_path_factory):
    values = tmp_path_factory.mktemp("portal") / "values.yaml"
    values.write_text(yaml.safe_dump({"taugrid-core": {"portal": {
        "workspaceDirectory": DIRECTORY, "jobs": {"scopeMode": "workspace"}, "cluster": "local"}}}))
    return render("-f", str(values))


def test_the_deployment_invokes_only_flags_portal_serve_defines(render):
    from taugrid_portal.portal.cli import serve

    container = _portal(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["taugrid-portal"] and container["args"][:2] == ["portal", "serve"]
    defined = {opt for param in serve.params for opt in param.opts}
    flags = [a.split("=", 1)[0] for a in container["args"][2:]]
    assert set(flags) <= defined, set(flags) - defined
    assert "--addr=0.0.0.0:8080" in container["args"] and "--in-cluster" in container["args"]
    # the values the chart passes are ones the command accepts
    choices = {p.opts[0]: p.type.choices for p in serve.params if hasattr(p.type, "choices")}
    for arg in container["args"][2:]:
        flag, _, value = arg.partition("=")
        if flag in choices:
            assert value in choices[flag], arg
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_clusterip_service_serviceaccount_and_no_ingress(render):
    objects = render()
    service = _portal(objects, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert not [o for o in objects if o["kind"] in ("Ingress", "Route", "HTTPRoute")]
    assert not [o for o in objects if o["kind"] == "Service" and o["spec"].get("type") in ("NodePort", "LoadBalancer")]
    pod = _portal(objects, "Deployment")["spec"]["template"]["spec"]
    assert _portal(objects, "ServiceAccount")["metadata"]["namespace"] == "tau-system"
    assert pod["serviceAccountName"] == "tau-portal"


def test_the_cluster_role_is_deploy_portal_rbac_yaml(render):
    objects = render()
    source = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy" / "portal" / "rbac.yaml").read_text())}
    role = _portal(objects, "ClusterRole", "tau-portal-reader")
    assert role["rules"] == source["ClusterRole"]["rules"]
    binding = _portal(objects, "ClusterRoleBinding", "tau-portal-reader")
    assert binding["roleRef"] == source["ClusterRoleBinding"]["roleRef"]
    assert binding["subjects"] == source["ClusterRoleBinding"]["subjects"]


def test_stellar_accepts_exactly_the_service_dns_names(render):
    container = _portal(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TAU_STELLAR_ALLOWED_HOSTS"].split(",") == [
        "tau-portal", "tau-portal.tau-system", "tau-portal.tau-system.svc", "tau-portal.tau-system.svc.cluster.local"]


def test_no_directory_means_no_configmap_and_no_flag(render):
    objects = render()
    args = _portal(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--workspace-directory") for a in args)
    assert not [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "tau-portal-workspaces"]


def test_workspace_directory_is_a_mounted_configmap_the_portal_accepts(managed, tmp_path):
    from taugrid_portal.portal.directory import load_directory

    pod = _portal(managed, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "--workspace-directory=/etc/tau-portal/workspaces.json" in container["args"]
    assert "--jobs-scope-mode=workspace" in container["args"]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == "workspace-directory"]
    assert (mount["mountPath"], mount["subPath"], mount["readOnly"]) == (
        "/etc/tau-portal/workspaces.json", "workspaces.json", True)
    [volume] = [v for v in pod["volumes"] if v["name"] == "workspace-directory"]
    config = _portal(managed, "ConfigMap", volume["configMap"]["name"])
    (tmp_path / "workspaces.json").write_text(config["data"]["workspaces.json"])
    assert json.loads(config["data"]["workspaces.json"]) == DIRECTORY
    directory = load_directory(tmp_path / "workspaces.json")
    assert [w.id for w in directory.workspaces] == ["aurora"]


def _values(tmp_path, portal):
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"taugrid-core": {"portal": portal}}))
    return str(path)


def test_kusto_history_operator_and_policy_values_reach_flags_the_portal_accepts(render, tmp_path):
    from taugrid_portal.portal.cli import serve
    from taugrid_portal.portal.kusto_flags import kusto_config, run_history_config

    objects = render("-f", _values(tmp_path, {
        "jobs": {"scopeMode": "operator", "operatorScopes": ["vision=aurora/jobqueue", "nlp=borealis/q2"],
                 "policyPath": "/etc/tau/policy.yaml"},
        "kusto": {"queryCommand": "kq", "costDatabase": "Costs"}, "cluster": "west",
        "runHistory": {"enabled": True, "table": "Hist", "limit": 50}}))
    args = _portal(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    for flag in ("--kusto-query-command=kq", "--kusto-cost-database=Costs", "--jobs-operator-scope=vision=aurora/jobqueue",
                 "--jobs-operator-scope=nlp=borealis/q2", "--run-history-enabled", "--run-history-table=Hist",
                 "--run-history-limit=50", "--policy=/etc/tau/policy.yaml"):
        assert flag in args, (flag, args)
    params = dict(serve.make_context("serve", args[2:]).params)  # click parses every flag the chart passes
    kusto = kusto_config(params)
    history = run_history_config(params, kusto, managed=False, cluster=params["cluster_name"])
    assert (kusto.query_command, kusto.cost_database) == ("kq", "Costs")
    assert (history.enabled, history.table, history.limit) == (True, "Hist", 50)
    defaults = _portal(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--kusto-cost-database=CostTracking" in defaults and "--run-history-enabled" not in defaults


@pytest.mark.parametrize(("portal", "message"), [
    ({"jobs": {"scopeMode": "workspace"}}, "jobs.scopeMode=workspace needs portal.workspaceDirectory"),
    ({"jobs": {"scopeMode": "workspace"}, "workspaceDirectory": {"localCluster": "l", "workspaces": [
        {"id": "a", "cluster": "l", "namespace": "a", "source": "local"}]}}, "needs team, namespace and localQueue"),
    ({"jobs": {"scopeMode": "operator"}}, "needs at least one portal.jobs.operatorScopes entry"),
    ({"jobs": {"operatorScopes": ["a=b/c"]}}, "only used with portal.jobs.scopeMode=operator"),
    ({"jobs": {"scopeMode": "operator", "operatorScopes": ["a=ns/q", "b=ns/q"]}}, "lists ns/q twice"),
    ({"runHistory": {"enabled": True}}, "runHistory.enabled needs portal.kusto.endpoint or portal.kusto.queryCommand"),
    ({"source": "kusto"}, "source=kusto needs portal.kusto.endpoint or portal.kusto.queryCommand"),
    ({"jobsScopeMode": "operator"}, "jobsScopeMode"),  # the old spelling is refused by the schema, not ignored
    ({"access": {"mode": "authenticated-proxy", "externalURL": "http://portal.example"}}, "must be an https:// URL"),
    ({"access": {"mode": "authenticated-proxy", "externalURL": "https://u:p@portal.example"}}, "no user info"),
    ({"jobs": {"operatorScopes": ["bad"], "scopeMode": "operator"}}, "operatorScopes"),
])
def test_helm_refuses_invalid_portal_values(helm, umbrella, tmp_path, portal, message):
    result = helm("template", "taugrid", str(umbrella), "--namespace", "tau-system",
                  "-f", _values(tmp_path, {"enabled": True, **portal}), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-800:]


def test_the_enable_portal_guide_values_render_into_flags_the_portal_accepts(render, tmp_path):
    """The values of platform-admin-guide--enable-portal.md (workloadNamespace, source: kusto, kusto.endpoint and
    database, the workload-identity annotation, runHistory) render, and the pod carries the labels the guide's
    kubectl selects on."""
    from taugrid_portal.portal.cli import build_config, serve

    client_id = "00000000-0000-0000-0000-000000000001"
    objects = render("-f", _values(tmp_path, {
        "enabled": True, "cluster": "aks-west", "workspace": "aurora", "workloadNamespace": "aurora",
        "serviceAccount": {"create": True, "name": "tau-portal",
                           "annotations": {"azure.workload.identity/client-id": client_id}},
        "rbac": {"create": True}, "source": "kusto",
        "kusto": {"endpoint": "https://adx.westeurope.kusto.windows.net", "database": "Metrics"},
        "runHistory": {"enabled": True}, "kueueviz": {"enabled": True},
        "jobs": {"scopeMode": "operator", "operatorScopes": ["vision=aurora/jobqueue"]}}))
    deployment = _portal(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["app"] == "tau-portal" and labels["azure.workload.identity/use"] == "true"
    assert _portal(objects, "ServiceAccount")["metadata"]["annotations"] == {
        "azure.workload.identity/client-id": client_id}
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    for flag in ("--namespace=aurora", "--source=kusto", "--kusto-endpoint=https://adx.westeurope.kusto.windows.net",
                 "--kusto-database=Metrics", "--run-history-enabled", "--kueueviz", "--cluster=aks-west",
                 "--jobs-scope-mode=operator", "--jobs-operator-scope=vision=aurora/jobqueue"):
        assert flag in args, (flag, args)
    config, _ = build_config(dict(serve.make_context("serve", args[2:]).params))  # every flag the Portal validates
    assert (config.namespace, config.source, config.kusto.endpoint) == (
        "aurora", "kusto", "https://adx.westeurope.kusto.windows.net")
    assert config.run_history.enabled and config.kueueviz is not None and config.cluster == "aks-west"
    plain = _portal(render(), "Deployment")["spec"]["template"]
    assert "azure.workload.identity/use" not in plain["metadata"]["labels"]
    assert not any(a.startswith(("--namespace", "--kueueviz")) for a in plain["spec"]["containers"][0]["args"])
    probes = plain["spec"]["containers"][0]
    assert (probes["readinessProbe"]["periodSeconds"], probes["livenessProbe"]["periodSeconds"]) == (10, 30)
