"""The in-job marker (``tau_core.keys.ENV_CLUSTER_JOB``) is in every container of every rendered pod.

The SDK refuses ``.submit()`` inside a cluster job by that marker, so every renderer must set it in
every workload: this walks every pod spec found anywhere in every golden of every renderer (the example
goldens of ``tests/golden`` and the goldens of each distribution's ``tests/golden``), whatever the kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tau_core import keys
from tau_core import rendering as r
from tau_core.plugins import get_host

REPO = Path(__file__).resolve().parents[1]
GOLDENS = sorted([*REPO.glob("tests/golden/*/*.yaml"), *REPO.glob("tau-plugins/*/tests/golden/*.yaml"),
                  *REPO.glob("tau-core/tests/golden/*.yaml")])


def _objects(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe", pure=True).load_all(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict)]


def pod_specs(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping with a ``containers`` list (a pod spec), at any depth, with its path."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield where, node
        for key, value in node.items():
            yield from pod_specs(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from pod_specs(value, f"{where}[{i}]")


def _pods_of(path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for obj in _objects(path):
        name = f'{obj.get("kind")} {(obj.get("metadata") or {}).get("name")}'
        out += [(str(obj.get("kind")), f"{name} {where}", pod) for where, pod in pod_specs(obj.get("spec"), "spec")]
    return out


ALL_PODS = [(path, kind, where, pod) for path in GOLDENS for kind, where, pod in _pods_of(path)]


def test_goldens_cover_every_registered_renderer() -> None:
    rendered_kinds = {kind for _, kind, _, _ in ALL_PODS}
    registered = set(get_host().registry("renderers"))
    assert {"Job", "RayJob", "RayService", "Deployment"} <= registered
    assert registered <= rendered_kinds, f"renderers without a golden pod template: {registered - rendered_kinds}"


@pytest.mark.parametrize(("path", "where", "pod"), [(p, w, pod) for p, _, w, pod in ALL_PODS],
                         ids=[f"{p.relative_to(REPO)}:{w}" for p, _, w, _ in ALL_PODS])
def test_every_container_of_every_golden_pod_carries_the_marker(path: Path, where: str, pod: dict[str, Any]) -> None:
    for group in ("initContainers", "containers"):
        for container in pod.get(group) or []:
            values = [e.get("value") for e in container.get("env") or [] if e.get("name") == keys.ENV_CLUSTER_JOB]
            assert values == ["1"], (f"{path.relative_to(REPO)}: {where} {group} {container.get('name')} "
                                     f"has {keys.ENV_CLUSTER_JOB}={values}")


def test_the_marker_overrides_a_value_already_there_and_is_added_once() -> None:
    pod: dict[str, Any] = {"initContainers": [{"name": "init"}],
                           "containers": [{"name": "main", "env": [{"name": keys.ENV_CLUSTER_JOB, "value": ""}]}]}
    shared: list[dict[str, Any]] = []
    pod["containers"] += [{"name": "a", "env": shared}, {"name": "b", "env": shared}]
    r.mark_cluster_workload(pod)
    r.mark_cluster_workload(pod)
    for container in pod["initContainers"] + pod["containers"]:
        assert container["env"] == [{"name": keys.ENV_CLUSTER_JOB, "value": "1"}], container["name"]
