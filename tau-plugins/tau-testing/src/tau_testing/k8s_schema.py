"""Schema checks for rendered Kubernetes objects (used by tests of every distribution).

* Core kinds are checked against the Kubernetes 1.30 OpenAPI schemas shipped by
  ``kubernetes-validate``, in strict mode (unknown fields are errors).
* Kueue and KubeRay kinds are checked against the ``openAPIV3Schema`` of the CRDs under
  ``TAU_CRDS_DIR`` (default ``<repo>/../shared/crds``), made strict the same way; their
  ``metadata`` and embedded pod templates are additionally checked against the core schemas.

``kubernetes_validate`` and ``jsonschema`` are test dependencies only: they are imported
inside the functions.  It lives in tau-testing, beside the simulator: test support, never shipped
in a product package (``nox -s imports`` forbids product packages to import tau_testing).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from tau_testing.paths import ENV_CRDS_DIR, crds_dir

K8S_VERSION = "1.30"


class SchemaViolation(AssertionError):
    """A rendered object does not match its schema; the message lists every problem."""


def _load_yaml_docs(path: Path) -> list[Any]:
    try:  # PyYAML's C loader (a kubernetes-validate dependency) is ~50x faster on large CRDs
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return list(yaml.load_all(path.read_text(), Loader=loader))
    except ImportError:
        from ruamel.yaml import YAML

        return list(YAML(typ="safe", pure=True).load_all(path.read_text()))


@lru_cache(maxsize=32)
def _crd_file_schemas(path: str) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in _load_yaml_docs(Path(path)):
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        for version in spec.get("versions", []):
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if schema:
                found[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = _strict(schema)
    return found


def crd_schema(directory: str, api_version: str, kind: str) -> dict[str, Any] | None:
    """The strict ``openAPIV3Schema`` for ``apiVersion``/``kind`` from the CRDs under ``directory``."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"CRD directory {root} does not exist; set {ENV_CRDS_DIR}")
    group = api_version.split("/", 1)[0]
    # CRD files are named <group>_<plural>.yaml: try the likely file, then the group's others
    preferred = sorted(root.rglob(f"{group}_{kind.lower()}s.yaml"))
    same_group = [p for p in sorted(root.rglob(f"{group}_*.yaml")) if p not in preferred]
    for path in preferred + same_group:
        schema = _crd_file_schemas(str(path)).get((api_version, kind))
        if schema is not None:
            return schema
    return None


def _strict(schema: Any) -> Any:
    """Copy of ``schema`` where objects with declared properties reject unknown fields."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=64)
def _core_validator(api_version: str, kind: str) -> Any:
    import importlib.resources as resources
    import re

    import jsonschema
    from referencing import Registry, Resource

    schema_dir = f"v{K8S_VERSION}.0-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    base = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", schema_dir)
    try:
        schema = json.loads(base.joinpath(f"{kind.lower()}-{group_version}.json").read_text())
    except FileNotFoundError:
        return None
    definitions = _definitions(schema_dir)
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(definitions) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@lru_cache(maxsize=2)
def _definitions(schema_dir: str) -> Any:
    import importlib.resources as resources

    path = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", schema_dir, "_definitions.json")
    return json.loads(path.read_text())


@lru_cache(maxsize=64)
def _crd_validator(directory: str, api_version: str, kind: str) -> Any:
    import jsonschema

    schema = crd_schema(directory, api_version, kind)
    return None if schema is None else jsonschema.Draft202012Validator(schema)


def _errors(validator: Any, obj: Any, where: str) -> Iterator[str]:
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        path = ".".join(str(p) for p in error.absolute_path) or "(root)"
        yield f"{where}: {path}: {error.message[:300]}"


def object_errors(obj: Mapping[str, Any], *, crds: Path | None = None) -> list[str]:
    """Every schema problem of one object (empty when valid)."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    name = f"{kind}/{(obj.get('metadata') or {}).get('name', '?')}"
    core = _core_validator(api_version, kind)
    if core is not None:
        return list(_errors(core, obj, name))
    directory = str(crds or crds_dir())
    crd = _crd_validator(directory, api_version, kind)
    if crd is None:
        return [
            f"{name}: no schema for apiVersion {api_version} kind {kind} (core {K8S_VERSION} or CRDs in {directory})"
        ]
    problems = list(_errors(crd, obj, name))
    meta_check = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj.get("metadata") or {}}
    problems += list(_errors(_core_validator("v1", "ConfigMap"), meta_check, f"{name} metadata"))
    for path, template in _pod_templates(obj):
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "template"}, "template": template}
        problems += list(_errors(_core_validator("v1", "PodTemplate"), wrapped, f"{name} {path}"))
    return problems


def _pod_templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    spec = obj.get("spec") or {}
    cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or (spec if "headGroupSpec" in spec else {})
    head = (cluster.get("headGroupSpec") or {}).get("template")
    if head is not None:
        yield "headGroupSpec.template", head
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        if group.get("template") is not None:
            yield f"workerGroupSpecs[{i}].template", group["template"]
    submitter = spec.get("submitterPodTemplate")
    if submitter is not None:
        yield "submitterPodTemplate", submitter


def validate_objects(objects: Iterable[Mapping[str, Any]], *, crds: Path | None = None) -> None:
    """Raise :class:`SchemaViolation` listing every problem in ``objects``."""
    problems: list[str] = []
    for obj in objects:
        problems += object_errors(obj, crds=crds)
    if problems:
        raise SchemaViolation("rendered objects violate their schemas:\n  " + "\n  ".join(problems))
