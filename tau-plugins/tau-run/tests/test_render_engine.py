"""The rendering engine: renderer dispatch through the plugin host, keys defined once, import
lightness, and property-based checks that random valid intents render schema-valid objects."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core import keys
from tau_core.config import load_config
from tau_core.errors import ConfigError, PluginError
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host
from tau_core.rendering import RenderRequest, kind_for_engine, render
from tau_testing.k8s_schema import validate_objects

REPO = Path(__file__).resolve().parents[3]


class _RunRenderers:
    """The registrations tau-run's plugin makes, as an inline plugin (no entry points needed)."""

    @hookimpl
    def tau_register_renderers(self, register: Any) -> None:
        register("Job", "tau_run.renderers.job:render_job")
        register("RayJob", "tau_run.renderers.rayjob:render_rayjob")


def _request(engine: str, tmp_path: Path) -> RenderRequest:
    (tmp_path / "train.py").write_text("print(1)\n")
    config = {"engine": engine, "entrypoint": "train.py", "runtime": {"image": "python:3.12"}, "compute": {"gpus": 0}}
    return RenderRequest(name="r1", config=config, context={"namespace": "ns", "queue": "q"}, config_dir=tmp_path)


def test_render_dispatches_by_engine(tmp_path: Path) -> None:
    host = Host.create(entry_points=False, extra_plugins=[("tau-run-renderers", _RunRenderers())], env={})
    [job] = render(_request("job", tmp_path), host)
    assert job["kind"] == "Job"
    [ray] = render(_request("rayjob", tmp_path), host)
    assert ray["kind"] == "RayJob"
    [ray] = render(_request("ray", tmp_path), host)
    assert ray["kind"] == "RayJob"


def test_installed_tau_run_registers_both_renderers() -> None:
    registry = Host.create(env={}).registry("renderers")
    assert registry["Job"].target == "tau_run.renderers.job:render_job"
    assert registry["RayJob"].target == "tau_run.renderers.rayjob:render_rayjob"


def test_missing_renderer_is_a_clean_error(tmp_path: Path) -> None:
    host = Host.create(entry_points=False, env={})
    with pytest.raises(PluginError, match="no renderer is registered for kind Job"):
        render(_request("job", tmp_path), host)
    with pytest.raises(ConfigError, match='engine "spark" is not valid'):
        kind_for_engine("spark")


def test_a_platform_renderer_can_replace_the_builtin(tmp_path: Path) -> None:
    class Custom:
        @hookimpl
        def tau_register_renderers(self, register: Any) -> None:
            register(
                "Job",
                lambda request: [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": request.name}}],
                priority=10,
            )

    host = Host.create(entry_points=False, extra_plugins=[("builtin", _RunRenderers()), ("site", Custom())], env={})
    [obj] = render(_request("job", tmp_path), host)
    assert obj == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r1"}}


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_tau_keys_are_defined_once() -> None:
    files = [
        *sorted((REPO / "tau-core/src/tau_core/rendering").glob("*.py")),
        REPO / "tau-core/src/tau_core/render_scripts.py",
        *sorted((REPO / "tau-plugins/tau-run/src/tau_run/renderers").glob("*.py")),
    ]
    offenders = [
        f"{p.relative_to(REPO)}:{line}: {value!r}"
        for p in files
        for line, value in _string_constants(p)
        if keys.DOMAIN + "/" in value
    ]
    assert not offenders, "use tau_core.keys instead of inline keys:\n" + "\n".join(offenders)
    values = [v for k, v in vars(keys).items() if k.isupper() and isinstance(v, str) and "/" in v]
    assert len(values) == len(set(values)), "a key is defined twice in tau_core.keys"


def test_renderers_import_no_heavy_modules() -> None:
    code = (
        "import sys, tau_run.renderers.job, tau_run.renderers.rayjob, tau_core.rendering\n"
        "heavy = [m for m in ('kubernetes_asyncio', 'jsonschema', 'kubernetes_validate', 'polars', 'ray', 'yaml')"
        " if m in sys.modules]\nprint(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"


# -- property-based: random valid intents render schema-valid, deterministic objects ---------------

_BASE = """\
name: prop
engine: job
entrypoint: train.py
runtime:
  image: python:3.12
compute:
  gpus: 0
policy:
  namespace: research
  queue: q
"""


@pytest.fixture(scope="module")
def base_config(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("prop")
    (root / "tau.yaml").write_text(_BASE)
    (root / "train.py").write_text("print('prop')\n")
    return load_config(root / "tau.yaml").normalized, root


_intents = st.fixed_dictionaries(
    {
        "gpus": st.integers(0, 8),
        "gpu_class": st.sampled_from([None, "any", "a100-80gb", "h100-80gb", "a10-24gb"]),
        "topology": st.sampled_from([None, "independent", "single-node-nvlink", "multi-node-nccl", "elastic-workers"]),
        "torchrun": st.booleans(),
        "nodes": st.integers(1, 4),
        "nproc": st.integers(1, 4),
        "pvc": st.sampled_from([None, "blob-training"]),
        "staged": st.booleans(),
        "restricted": st.booleans(),
        "ttl": st.sampled_from([None, 1, 3600, 2147483647]),
        "env": st.dictionaries(
            st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True).filter(
                lambda k: not k.startswith(("TAU_", "NCCL_", "MASTER_"))
            ),
            st.text(max_size=20),
            max_size=3,
        ),
        "secret": st.booleans(),
        "profile": st.booleans(),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(intent=_intents)
def test_random_job_intents_render_valid_objects(
    base_config: tuple[dict[str, Any], Path], intent: dict[str, Any]
) -> None:
    from tau_run.renderers.job import render_job

    base, root = base_config
    cfg = copy.deepcopy(base)
    cfg["compute"]["gpus"] = intent["gpus"]
    cfg["policy"]["gpu_class"] = intent["gpu_class"]
    cfg["policy"]["topology"] = intent["topology"]
    if intent["torchrun"]:
        cfg["execution"].update(launcher="torchrun", nodes=intent["nodes"], processes_per_node=intent["nproc"])
    cfg["storage"]["data_pvc"] = intent["pvc"]
    cfg["storage"]["publish"] = "staged" if intent["staged"] else None
    cfg["runtime"]["security"]["mode"] = "restricted" if intent["restricted"] else None
    cfg["run"]["ttl_seconds_after_finished"] = intent["ttl"]
    cfg["runtime"]["env"] = intent["env"] or None
    cfg["runtime"]["env_secret"] = {"API_TOKEN": "api:token"} if intent["secret"] else None
    context: dict[str, Any] = {"dry_run": "client"}
    if intent["profile"]:
        context.update(
            workload_profile={
                "name": "p",
                "defaultLocalQueue": "jobqueue",
                "placement": "independent",
                "priorities": {"workloadPriorityClassName": "w"},
            },
            profile_set_hash="0" * 64,
            tau_cluster_generation=1,
        )
    request = RenderRequest(name="prop", config=cfg, context=context, config_dir=root, submission_id="s" * 24)
    try:
        objects = render_job(request)
    except ConfigError as exc:  # a rule the combination breaks: one clean line, never a traceback
        assert exc.message and "\n" not in exc.message and exc.hint
        return
    validate_objects(objects)
    assert json.dumps(objects) == json.dumps(render_job(request))
    job = objects[0]
    assert job["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] in ("q", "jobqueue")
    assert "api:token" not in json.dumps(objects) and '"api"' not in json.dumps(objects)
    pod = job["spec"]["template"]["spec"]
    if intent["restricted"]:
        for c in pod.get("initContainers", []) + pod["containers"]:
            assert c["securityContext"]["runAsNonRoot"] is True
    multi = intent["torchrun"] and intent["nodes"] > 1
    assert (len(objects) == 2) == multi
    if intent["gpus"] > 0:
        assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])


def test_schema_helper_catches_unknown_fields_and_bad_types(tmp_path: Path) -> None:
    from tau_testing.k8s_schema import SchemaViolation, object_errors

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"suspend": "yes", "template": {"spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}]}}},
    }
    problems = object_errors(job)
    assert any("suspend" in p for p in problems) and any("bogus" in p for p in problems)
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "r", "labels": {"a": 1}},
        "spec": {"entrypointt": "x"},
    }
    problems = object_errors(rayjob)
    assert any("entrypointt" in p for p in problems) and any("metadata.labels.a" in p for p in problems)
    assert object_errors({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})[0].endswith(
        "(core 1.30 or CRDs in " + str(__import__("tau_testing.k8s_schema").k8s_schema.crds_dir()) + ")"
    )
    with pytest.raises(SchemaViolation, match="bogus"):
        validate_objects([job])
    with pytest.raises(FileNotFoundError, match="TAU_CRDS_DIR"):
        object_errors(rayjob, crds=tmp_path / "missing")


_RAY_BASE = """\
name: propray
engine: rayjob
entrypoint: train.py
compute:
  workers: 1
policy:
  namespace: research
  queue: q
"""

_ray_intents = st.fixed_dictionaries(
    {
        "workers": st.integers(1, 16),
        "gpw": st.integers(0, 8),
        "gpu_class": st.sampled_from([None, "any", "h100-80gb"]),
        "topology": st.sampled_from([None, "independent", "single-node-nvlink", "multi-node-nccl"]),
        "image": st.sampled_from([None, "mcr.microsoft.com/aks/ai-runtime/ray:py3.12-ray2.40.0", "ray:latest"]),
        "pip": st.lists(st.sampled_from(["torch==2.4.0", "numpy", "pyyaml>=6"]), max_size=3, unique=True),
        "pvc": st.sampled_from([None, "blob"]),
        "staged": st.booleans(),
        "restricted": st.booleans(),
        "mig": st.sampled_from([None, "1g.10gb"]),
        "head_cpu": st.sampled_from([None, "500m", "2"]),
    }
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(intent=_ray_intents)
def test_random_rayjob_intents_render_valid_objects(
    tmp_path_factory: pytest.TempPathFactory, intent: dict[str, Any]
) -> None:
    from tau_run.renderers.rayjob import render_rayjob

    root = tmp_path_factory.getbasetemp() / "propray"
    if not (root / "tau.yaml").exists():
        root.mkdir(exist_ok=True)
        (root / "tau.yaml").write_text(_RAY_BASE)
        (root / "train.py").write_text("print('ray')\n")
    cfg = copy.deepcopy(load_config(root / "tau.yaml").normalized)
    cfg["compute"].update(workers=intent["workers"], gpus_per_worker=intent["gpw"], head_cpu_request=intent["head_cpu"])
    if intent["mig"] and intent["gpw"]:
        cfg["compute"].update(mig_profile=intent["mig"], gpu_resource_mode="mig")
    cfg["policy"].update(gpu_class=intent["gpu_class"], topology=intent["topology"])
    cfg["runtime"].update(image=intent["image"], pip=intent["pip"] or None)
    cfg["runtime"]["security"]["mode"] = "restricted" if intent["restricted"] else None
    cfg["storage"].update(data_pvc=intent["pvc"], publish="staged" if intent["staged"] else None)
    request = RenderRequest(name="propray", config=cfg, context={}, config_dir=root)
    try:
        objects = render_rayjob(request)
    except ConfigError as exc:
        assert exc.message and "\n" not in exc.message and exc.hint
        return
    validate_objects(objects)
    [rj] = objects
    workers = rj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert workers["replicas"] == intent["workers"]
    resources = workers["template"]["spec"]["containers"][0]["resources"]
    gpu_key = f"nvidia.com/mig-{intent['mig']}" if intent["mig"] and intent["gpw"] else "nvidia.com/gpu"
    assert resources["limits"].get(gpu_key) == (str(intent["gpw"]) if intent["gpw"] else None)
    head = rj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    assert json.dumps(objects) == json.dumps(render_rayjob(request))
