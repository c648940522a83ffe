"""`tau serve` end to end against the simulated TauGrid cluster, as the researcher, through the CLI.

The simulator runs the KubeRay RayService controller, the Deployment controller (with the scale
subresource) and Kueue's pod integration; `kubectl` (the real binary) reads the same objects.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tau_core.config.profiles import profile_set_hash

IMAGE = "registry.example.com/serve/llm@sha256:" + "a" * 64
NS = "aurora"


@pytest.fixture
def tls_grid(tmp_path: Path, tau_env: dict[str, str | None]) -> Iterator[Any]:
    """The TauGrid scenario served over TLS (kubectl sends a bearer token only over HTTPS)."""
    from tau_testing.sim import SimCluster
    from tau_testing.sim.scenarios.taugrid import RESEARCHER, TauGridScenario

    cluster = SimCluster(clock="fake", tls=True).start()
    try:
        grid = TauGridScenario.install(cluster, tmp_path / "volume")
        grid.kubeconfig = cluster.write_kubeconfig(tmp_path / "kube" / "config", user=RESEARCHER)
        tau_env["KUBECONFIG"] = str(grid.kubeconfig)
        yield grid
    finally:
        cluster.stop()


def deploy_args(name: str, *extra: str) -> list[str]:
    return ["serve", "deploy", name, "--profile", "cpu-small", "--image", IMAGE, "-n", NS, *extra]


def get(grid: Any, api: str, kind: str, name: str) -> dict[str, Any] | None:
    return grid.cluster.store.get(api, kind, NS, name)


def status_json(tau_cli: Any, name: str, kind: str) -> dict[str, Any]:
    result = tau_cli("serve", "status", name, "--kind", kind, "-n", NS, "-o", "json")
    assert result.exit_code == 0, result
    return json.loads(result.stdout)


def serve_config(obj: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(obj["spec"]["serveConfigV2"])


def test_rayservice_deploys_becomes_ready_scales_via_serve_config_and_is_deleted(
        taugrid_cluster: Any, tau_cli: Any) -> None:
    result = tau_cli(*deploy_args("llm", "--replicas", "2", "--checkpoint", "llm/step-100"))
    assert result.exit_code == 0, result
    assert "deployed service llm (kind=rayservice, profile=cpu-small" in result.stdout
    assert "track: tau serve status llm -n aurora --kind rayservice" in result.stdout
    service = get(taugrid_cluster, "ray.io/v1", "RayService", "llm")
    assert service is not None
    assert service["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobqueue"
    assert serve_config(service)["applications"][0]["deployments"][0]["num_replicas"] == 2
    head = service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {"name": "TAU_MODEL_PATH", "value": "/data/checkpoints/llm/step-100"} in head["env"]

    taugrid_cluster.cluster.settle()  # the controllers' own status writes are done
    before = get(taugrid_cluster, "ray.io/v1", "RayService", "llm")
    again = tau_cli(*deploy_args("llm", "--replicas", "2", "--checkpoint", "llm/step-100"))
    assert again.exit_code == 0, again
    after = get(taugrid_cluster, "ray.io/v1", "RayService", "llm")
    assert before and after and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    taugrid_cluster.cluster.advance(60)
    taugrid_cluster.cluster.requests.clear()
    ready = status_json(tau_cli, "llm", "rayservice")
    assert ready["ready"] is True and ready["status"] == "Running" and ready["endpoints"] >= 1
    assert taugrid_cluster.cluster.requests.total <= 4  # one status refresh
    table = tau_cli("serve", "status", "llm", "-n", NS)
    assert table.stdout.split("\n")[0].split() == ["NAME", "STATUS", "READY", "AGE"]
    watched = tau_cli("serve", "status", "llm", "-n", NS, "--watch", "--timeout", "5")
    assert watched.exit_code == 0 and "llm: Ready" in watched.stdout

    scaled = tau_cli("serve", "scale", "llm", "--replicas", "4", "-n", NS)
    assert scaled.exit_code == 0, scaled
    service = get(taugrid_cluster, "ray.io/v1", "RayService", "llm")
    assert service is not None
    assert serve_config(service)["applications"][0]["deployments"][0]["num_replicas"] == 4
    assert status_json(tau_cli, "llm", "rayservice")["replicas"] == 4
    negative = tau_cli("serve", "scale", "llm", "--replicas", "-1", "-n", NS)
    assert negative.exit_code == 2 and "--replicas" in negative.stderr

    for _ in range(2):  # idempotent
        deleted = tau_cli("serve", "delete", "llm", "-n", NS)
        assert deleted.exit_code == 0, deleted
    assert get(taugrid_cluster, "ray.io/v1", "RayService", "llm") is None


def test_deployment_with_service_probes_and_hpa_deploys_scales_and_deletes(
        tls_grid: Any, tau_cli: Any, kubectl_bin: Path, tmp_path: Path) -> None:
    taugrid_cluster = tls_grid
    args = deploy_args("web", "--kind", "deployment", "--deployment-port", "8080", "--service-port", "80",
                       "--readiness-path", "/ready", "--max-replicas", "3", "--min-replicas", "1",
                       "--command", "python", "--command", "-m", "--command", "server")
    result = tau_cli(*args)
    assert result.exit_code == 0, result
    for api, kind in (("apps/v1", "Deployment"), ("v1", "Service"), ("autoscaling/v2", "HorizontalPodAutoscaler")):
        assert get(taugrid_cluster, api, kind, "web") is not None, kind
    taugrid_cluster.cluster.advance(60)
    ready = status_json(tau_cli, "web", "deployment")
    assert ready["ready"] is True and ready["ready_replicas"] == ready["desired"] == 1

    before = get(taugrid_cluster, "apps/v1", "Deployment", "web")
    assert before is not None
    again = tau_cli(*args)  # a redeploy of the same intent changes nothing
    assert again.exit_code == 0, again
    after = get(taugrid_cluster, "apps/v1", "Deployment", "web")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    kube_env = {"KUBECONFIG": str(taugrid_cluster.kubeconfig), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    annotate = subprocess.run([str(kubectl_bin), "annotate", "deployment", "web", "-n", NS, "example.com/owner=sre"],
                              capture_output=True, text=True, check=False, env=kube_env)
    assert annotate.returncode == 0, annotate.stderr
    changed = tau_cli(*[a if a != "/ready" else "/healthz" for a in args])  # a real change, redeployed
    assert changed.exit_code == 0, changed
    kept = get(taugrid_cluster, "apps/v1", "Deployment", "web")
    assert kept is not None and kept["metadata"]["annotations"]["example.com/owner"] == "sre"  # foreign field kept
    probe = kept["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]
    assert probe["httpGet"]["path"] == "/healthz"

    assert tau_cli("serve", "scale", "web", "--kind", "deployment", "--replicas", "2", "-n", NS).exit_code == 0
    taugrid_cluster.cluster.advance(60)
    scaled = status_json(tau_cli, "web", "deployment")
    assert scaled["desired"] == 2 and scaled["ready_replicas"] == 2

    assert tau_cli(*deploy_args("llm")).exit_code == 0
    seen = subprocess.run([str(kubectl_bin), "get", "deployment,service,hpa,rayservice", "-n", NS, "-o", "name"],
                          capture_output=True, text=True, check=False,
                          env=kube_env)
    assert seen.returncode == 0, seen.stderr
    assert {"deployment.apps/web", "service/web", "horizontalpodautoscaler.autoscaling/web",
            "rayservice.ray.io/llm"} <= set(seen.stdout.split())

    assert tau_cli("serve", "delete", "web", "--kind", "deployment", "-n", NS).exit_code == 0
    for api, kind in (("apps/v1", "Deployment"), ("v1", "Service"), ("autoscaling/v2", "HorizontalPodAutoscaler")):
        assert get(taugrid_cluster, api, kind, "web") is None, kind
    gone = tau_cli("serve", "delete", "web", "--kind", "deployment", "-n", NS)
    assert gone.exit_code == 0 and "already gone" in gone.stdout


def test_namespace_without_default_local_queue_gets_the_onboarding_error(taugrid_cluster: Any, tau_cli: Any) -> None:
    taugrid_cluster.cluster.store.delete("kueue.x-k8s.io/v1beta2", "LocalQueue", NS, "jobqueue")
    result = tau_cli(*deploy_args("llm"))
    assert result.exit_code == 1
    assert 'namespace "aurora" is not onboarded for serving' in result.stderr
    assert "platform team" in result.stderr
    assert get(taugrid_cluster, "ray.io/v1", "RayService", "llm") is None


def test_stale_profile_set_is_refused(taugrid_cluster: Any, tau_cli: Any) -> None:
    store = taugrid_cluster.cluster.store
    tau_cluster = store.get("tau.azure.com/v1alpha1", "TauCluster", "", "cluster")
    tau_cluster["spec"]["workspaceDefaults"] = {"defaultQueue": "other"}  # a new generation, status not yet
    store.update(tau_cluster)
    result = tau_cli(*deploy_args("llm"))
    assert result.exit_code == 1 and "stale" in result.stderr
    unknown = tau_cli(*deploy_args("llm")[:-2], "-n", NS, "--profile", "nope")
    assert unknown.exit_code != 0


@pytest.mark.parametrize(("extra", "flag"), [
    (["--checkpoint", "../../etc/passwd"], "--checkpoint"),
    (["--volume", "cache=emptyDir", "--mount", "other:/cache"], "--mount"),
    (["--replicas", "2", "--max-replicas", "3"], "--max-replicas"),
    (["--kind", "deployment", "--shm-size", "1Gi"], "--shm-size"),
    (["--command", "python"], "--command"),
    (["--checkpoint", "x", "--from-model", "llm:prod"], "--checkpoint"),
])
def test_hostile_input_is_a_usage_error_naming_the_flag(taugrid_cluster: Any, tau_cli: Any, extra: list[str],
                                                       flag: str) -> None:
    result = tau_cli(*deploy_args("llm"), *extra)
    assert result.exit_code == 2, result.stderr
    assert flag in result.stderr


def test_unpinned_image_is_a_usage_error(taugrid_cluster: Any, tau_cli: Any) -> None:
    result = tau_cli("serve", "deploy", "llm", "--profile", "cpu-small", "--image", "python:3.12", "-n", NS)
    assert result.exit_code == 2 and "--image" in result.stderr and "pinned" in result.stderr


def test_offline_client_dry_run_from_a_snapshot(tmp_path: Path, tau_cli: Any) -> None:
    from tau_testing.sim.scenarios.taugrid import objects

    cluster = next(o for o in objects() if o["kind"] == "TauCluster")
    profiles = cluster["status"]["workloadProfiles"]["profiles"]
    snapshot = tmp_path / "profiles.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkloadProfileSnapshot",
                                        "tauClusterGeneration": 1, "profileSetHash": profile_set_hash(profiles),
                                        "profiles": profiles}))
    result = tau_cli(*deploy_args("llm", "--dry-run=client", "--workload-profile-snapshot", str(snapshot),
                                  "--env-secret", "HF_TOKEN=hf-secret:token"))
    assert result.exit_code == 0, result
    assert "offline client dry-run: snapshot profile" in result.stderr
    rendered = yaml.safe_load(result.stdout)
    assert rendered["kind"] == "RayService" and "hf-secret" not in result.stdout
    server = tau_cli(*deploy_args("llm", "--dry-run=server", "--workload-profile-snapshot", str(snapshot)))
    assert server.exit_code == 2 and "--workload-profile-snapshot requires --dry-run=client" in server.stderr


class VolumeShell:
    """Runs the registry helper pod's own shell script with its PVC mount mapped onto the scenario's volume
    (the simulator runs no containers; the host's sh/coreutils stand in for busybox)."""

    def __init__(self, volume: Path) -> None:
        self.volume = volume
        self.done: dict[str, list[str]] = {}

    def __call__(self, pod: dict[str, Any], container: str) -> list[str]:
        import os

        uid = pod["metadata"].get("uid") or pod["metadata"]["name"]
        if uid not in self.done:
            spec = pod["spec"]["containers"][0]
            env = {e["name"]: e.get("value", "") for e in spec.get("env", [])}
            mount = spec["volumeMounts"][0]["mountPath"]
            env["TAU_PVC_ROOT"] = str(self.volume) + env["TAU_PVC_ROOT"][len(mount):]
            out = subprocess.run(spec["command"], env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                                 text=True, timeout=60, check=False)
            self.done[uid] = out.stdout.splitlines()
        return self.done[uid]


def test_deploy_from_a_finetune_checkpoint_and_from_a_model_alias(taugrid_cluster: Any, tau_cli: Any) -> None:
    from tau_core.storage.pvchelper import APP
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(taugrid_cluster.cluster).add({"app": APP}, PodScript(run_seconds=0,
                                                                    logs=VolumeShell(taugrid_cluster.volume)))
    run_dir = "checkpoints/finetunes/ft-a"
    taugrid_cluster.write(f"{run_dir}/artifacts.json", json.dumps({"artifacts": [
        {"name": "step-100", "path": "artifacts/step-100"},
        {"name": "final", "path": "artifacts/final", "default": True}]}))
    taugrid_cluster.write(f"{run_dir}/artifacts/final/model.bin", b"w")
    taugrid_cluster.write("model-registry/models/llama/runs/ft-a.json", json.dumps({
        "run": "ft-a", "model": "llama", "registry_path": f"/data/{run_dir}",
        "artifacts": [{"name": "final", "path": "artifacts/final", "default": True}]}))
    taugrid_cluster.write("model-registry/models/llama/aliases/prod.json", json.dumps({
        "model": "llama", "alias": "prod", "run": "ft-a", "record_path": "model-registry/models/llama/runs/ft-a.json",
        "updated_at": "2026-12-01T00:00:00Z"}))

    def model_path(name: str) -> str:
        obj = get(taugrid_cluster, "ray.io/v1", "RayService", name)
        assert obj is not None
        env = obj["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
        return next(e["value"] for e in env if e["name"] == "TAU_MODEL_PATH")

    assert tau_cli(*deploy_args("ft", "--from-finetune", "ft-a")).exit_code == 0
    assert model_path("ft") == f"/data/{run_dir}/artifacts/final"
    assert tau_cli(*deploy_args("ft-step", "--checkpoint-ref", "finetune/ft-a:step-100")).exit_code == 0
    assert model_path("ft-step") == f"/data/{run_dir}/artifacts/step-100"
    assert tau_cli(*deploy_args("prod", "--from-model", "llama:prod")).exit_code == 0
    assert model_path("prod") == f"/data/{run_dir}/artifacts/final"
    missing = tau_cli(*deploy_args("nope", "--from-model", "llama:canary"))
    assert missing.exit_code == 1 and "llama:canary does not exist" in missing.stderr
    offline = tau_cli(*deploy_args("ft", "--from-finetune", "ft-a", "--dry-run=client"))
    assert offline.exit_code == 2 and "artifacts.json" in offline.stderr


def test_status_names_pending_admission_when_the_queue_is_full(taugrid_cluster: Any, tau_cli: Any) -> None:
    result = tau_cli(*deploy_args("wide", "--kind", "deployment", "--replicas", "40", "--command", "serve"))
    assert result.exit_code == 0, result
    taugrid_cluster.cluster.advance(30)
    status = status_json(tau_cli, "wide", "deployment")
    assert status["ready"] is False and status["desired"] == 40
    assert any(h.startswith("pending admission:") and "LocalQueue jobqueue" in h for h in status["hints"])
    table = tau_cli("serve", "status", "wide", "--kind", "deployment", "-n", NS)
    assert table.stdout.split("\n")[0].split() == ["NAME", "READY", "DESIRED", "AVAILABLE", "AGE"]
    assert "hint: pending admission" in table.stdout
    watched = tau_cli("serve", "status", "wide", "--kind", "deployment", "-n", NS, "--watch", "--timeout", "0")
    assert watched.exit_code == 1 and "wide: Progressing" in watched.stdout
    assert "hint: pending admission" in watched.stdout and "is not ready after 0s" in watched.stderr


def test_server_and_client_dry_runs_create_nothing(taugrid_cluster: Any, tau_cli: Any) -> None:
    server = tau_cli(*deploy_args("llm", "--dry-run=server"))
    assert server.exit_code == 0, server
    assert "validated (server dry-run) service llm" in server.stdout
    client = tau_cli(*deploy_args("llm", "--dry-run=client", "--env-secret", "HF_TOKEN=hf:token"))
    assert client.exit_code == 0, client
    shown = yaml.safe_load(client.stdout)
    assert shown["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobqueue"
    head = shown["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    token = next(e for e in head["env"] if e["name"] == "HF_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "<redacted>", "key": "<redacted>"}
    assert get(taugrid_cluster, "ray.io/v1", "RayService", "llm") is None


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "serve-model"


@pytest.mark.parametrize(("flags", "kinds"), [
    (["llm", "--profile", "serve-1x", "--import-path", "serve:build", "--app-args", "app-args.yaml",
      "--checkpoint", "llm/step-100"], ["RayService"]),
    (["llm", "--profile", "serve-4x", "--nodes", "4", "--shm-size", "16Gi"], ["RayService"]),
    (["web", "--kind", "deployment", "--profile", "web-cpu", "--deployment-port", "8080", "--service-port", "80",
      "--readiness-path", "/healthz", "--max-replicas", "4"], ["Deployment", "Service", "HorizontalPodAutoscaler"]),
])
def test_serve_model_example_renders_offline(tau_cli: Any, monkeypatch: pytest.MonkeyPatch, flags: list[str],
                                            kinds: list[str]) -> None:
    from tau_testing.k8s_schema import validate_objects

    monkeypatch.chdir(EXAMPLE)
    result = tau_cli("serve", "deploy", *flags, "--image", IMAGE, "-n", NS, "--dry-run=client",
                     "--workload-profile-snapshot", "profiles.snapshot.yaml")
    assert result.exit_code == 0, result
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert [o["kind"] for o in objects] == kinds
    validate_objects(objects)
    if "--app-args" in flags:
        assert serve_config(objects[0])["applications"][0]["args"] == {"greeting": "hello from TauGrid"}
