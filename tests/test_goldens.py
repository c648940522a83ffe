"""Golden client dry-run output of every example target, rendered through the real ``tau`` CLI.

On a mismatch the failure shows a unified diff; when the change is intended, regenerate with
``python tests/tools/regen_goldens.py`` and review the golden diff in the commit.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tau_core import keys
from tau_testing.k8s_schema import validate_objects

_TOOL = Path(__file__).parent / "tools" / "regen_goldens.py"
_spec = importlib.util.spec_from_file_location("tau_regen_goldens", _TOOL)
assert _spec is not None and _spec.loader is not None
regen = importlib.util.module_from_spec(_spec)
sys.modules["tau_regen_goldens"] = regen
_spec.loader.exec_module(regen)

CASES = regen.cases()


def _objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe", pure=True).load_all(text) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[tuple[str, str], str]:
    return {case: regen.render(*case) for case in CASES}


def test_every_example_has_targets() -> None:
    examples = {example for example, _ in CASES}
    assert examples == set(regen.EXAMPLES)
    assert ("kind-smoke", "job") in CASES and ("kind-smoke", "ray") in CASES


@pytest.mark.parametrize(("example", "target"), CASES, ids=[f"{e}/{t}" for e, t in CASES])
def test_golden_matches(example: str, target: str, rendered: dict[tuple[str, str], str]) -> None:
    path = regen.golden_path(example, target)
    assert path.exists(), f"missing golden {path}; create it with: {regen.REGEN_COMMAND}"
    delta = regen.diff(example, target, rendered[(example, target)])
    if delta:
        pytest.fail(
            f"rendered output of examples/{example} target {target} differs from its golden:\n{delta}\n"
            f"if the change is intended, run: {regen.REGEN_COMMAND}",
            pytrace=False,
        )


@pytest.mark.parametrize(("example", "target"), CASES, ids=[f"{e}/{t}" for e, t in CASES])
def test_golden_objects_are_schema_valid(example: str, target: str, rendered: dict[tuple[str, str], str]) -> None:
    objects = _objects(rendered[(example, target)])
    assert objects and objects[0]["kind"] in ("Job", "RayJob")
    validate_objects(objects)
    meta = objects[0]["metadata"]
    assert meta["labels"][keys.MANAGED_BY] == "tau"
    assert len(meta["annotations"][keys.CONFIG_HASH]) == 64


def test_no_orphan_goldens() -> None:
    expected = {regen.golden_path(e, t) for e, t in CASES}
    assert set(regen.GOLDEN_DIR.rglob("*.yaml")) <= expected, f"remove orphans with: {regen.REGEN_COMMAND}"


def test_example_contracts(rendered: dict[tuple[str, str], str]) -> None:
    """What each example exists to show, checked on its rendered output."""
    [job] = _objects(rendered[("kind-smoke", "job")])
    assert job["kind"] == "Job" and job["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == "kind-cpu"
    assert job["metadata"]["annotations"][keys.WORKLOAD_PROFILE] == "kind-cpu-job"
    [ray] = _objects(rendered[("kind-smoke", "ray")])
    assert ray["kind"] == "RayJob" and ray["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 2
    job, svc = _objects(rendered[("kind-smoke", "torchrun")])
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    assert svc["kind"] == "Service" and svc["metadata"]["name"] == "tau-kind-ddp-headless"
    assert job["spec"]["template"]["spec"]["subdomain"] == "tau-kind-ddp-headless"
    [tune] = _objects(rendered[("ray-tune-smoke", "tune")])
    head_env = {
        e["name"] for e in tune["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert {"TAU_TUNE_METRIC", "TAU_TUNE_PARAM_SPACE"} <= head_env
    [portal] = _objects(rendered[("portal-ray-stellar", "train")])
    ann = portal["metadata"]["annotations"]
    assert ann[keys.STELLAR_EXPERIMENT_ID] == "ray-plus-stellar" and ann[keys.STELLAR_GROUP_VALUE] == "default"
    assert ann[keys.EXPERIMENT_SOURCE] == "stellar"
    text = rendered[("portal-ray-stellar", "train")]
    assert "claimName: blob-training" in text and "name: metrics-offload" in text
    [market] = _objects(rendered[("market-policy", "train")])
    workers = market["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    assert workers["spec"]["nodeSelector"] == {keys.GPU_CLASS: "h200-141gb"}
    assert workers["metadata"]["annotations"][keys.KUEUE_PODSET_REQUIRED_TOPOLOGY] == keys.HOSTNAME
    assert keys.KUEUE_PRIORITY_CLASS not in market["metadata"]["labels"]
    assert "hf-token" not in rendered[("market-policy", "train")], "secret names must be redacted in client dry-run"
    assert market["metadata"]["annotations"][keys.CHECKPOINT_ARTIFACT] == "/data/market-policy/policy.json"
    [cpu] = _objects(rendered[("cpu-multi-interest-ray", "train")])
    assert cpu["spec"]["runtimeEnvYAML"].startswith('working_dir: "file:///script/_tau_project.zip"')
    assert "python3 -m multi_interest.train" in cpu["spec"]["entrypoint"]
