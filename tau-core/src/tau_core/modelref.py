"""Model records and the model-reference resolver that ``tau serve --from-model`` calls.

References:

* ``MODEL:ALIAS``            -> the run the alias record points at;
* ``MODEL@RUN``              -> that run's registry record;
* ``finetune/RUN[:ARTIFACT]`` -> the finetune directory itself (``model.json`` when present).

Each resolves to a checkpoint path inside the durable volume (``/data/...``): the named artifact,
else the record's artifact marked ``default`` (or named ``final``), else the run's ``artifacts/``
directory.  Records are read through an :class:`~tau_core.storage.ObjectStore`, so the resolver
works the same on ``file://``, ``az://`` and the PVC.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import cattrs

from tau_core.errors import ConfigError, NotFoundError, UsageError
from tau_core.storage import layout
from tau_core.storage.base import ObjectStore, check_key, join_key

SCHEMA_VERSION = 1
_converter = cattrs.Converter(forbid_extra_keys=False)


@attrs.define
class PrimaryMetric:
    name: str
    value: float | None = None
    direction: str = "lower"  # lower | higher


@attrs.define
class Artifact:
    name: str
    path: str  # relative to the run directory, or an absolute /data/... path
    kind: str = "checkpoint"
    default: bool = False


@attrs.define
class ModelRecord:
    """``model-registry/models/<model>/runs/<run>.json``."""

    run: str
    model: str = "unknown"
    schema_version: int = SCHEMA_VERSION
    kind: str = "finetune"
    namespace: str = ""
    resource_name: str = ""
    created_at: str = ""
    completed_at: str = ""
    record_path: str = ""
    registry_path: str = ""
    artifacts_index: str = ""
    model_metadata: dict[str, str] = attrs.Factory(dict)
    tags: dict[str, str] = attrs.Factory(dict)
    metrics_path: str = ""
    metrics: dict[str, float] = attrs.Factory(dict)
    primary_metric: PrimaryMetric | None = None
    artifacts: list[Artifact] = attrs.Factory(list)
    storage_probe: dict[str, str] = attrs.Factory(dict)
    #: evidence from the experiment store: run id, config hash, summary source
    evidence: dict[str, str] = attrs.Factory(dict)


@attrs.define
class ModelAlias:
    model: str
    alias: str
    run: str
    record_path: str
    updated_at: str
    schema_version: int = SCHEMA_VERSION


@attrs.frozen
class ModelRef:
    form: str  # alias | run | finetune
    model: str = ""
    alias: str = ""
    run: str = ""
    artifact: str = ""


@attrs.frozen
class ResolvedModel:
    ref: str
    model: str
    run: str
    checkpoint_path: str  # absolute, inside the durable volume
    record_key: str
    record: ModelRecord


_FINETUNE = re.compile(r"^finetune/([^:]+)(?::(.+))?$")


def parse_model_ref(ref: str) -> ModelRef:
    """Parse a reference; any malformed part is a one-line UsageError."""
    if match := _FINETUNE.match(ref):
        run, artifact = match.group(1), match.group(2) or ""
        if artifact:
            check_key(artifact, what="artifact")
        return ModelRef(form="finetune", run=layout.slug(run, "run"), artifact=artifact)
    if ":" in ref:
        model, _, alias = ref.partition(":")
        return ModelRef(form="alias", model=layout.slug(model, "model"), alias=layout.slug(alias, "alias"))
    if "@" in ref:
        model, _, run = ref.partition("@")
        return ModelRef(form="run", model=layout.slug(model, "model"), run=layout.slug(run, "run"))
    raise UsageError(f"model reference {ref!r} must be MODEL:ALIAS, MODEL@RUN or finetune/RUN[:ARTIFACT]")


def structure_record(data: Any, source: str) -> ModelRecord:
    try:
        return _converter.structure(data, ModelRecord)
    except Exception as exc:  # cattrs raises class-validation groups
        raise ConfigError(f"{source}: not a valid model record ({cattrs.transform_error(exc)[0]})") from None


def unstructure(value: Any) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(value)
    return data


def read_json(store: ObjectStore, key: str) -> Any:
    try:
        return json.loads(store.read(key).data)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{store.url}/{key} is not valid JSON: {exc.msg} (line {exc.lineno})") from None


def _checkpoint(record: ModelRecord, run_dir: str, artifact: str) -> str:
    def absolute(path: str) -> str:
        if path.startswith(layout.DATA_MOUNT + "/"):
            check_key(path[len(layout.DATA_MOUNT) + 1:], what="artifact path")
            return path
        return f"{layout.DATA_MOUNT}/{join_key(run_dir, check_key(path, what='artifact path'))}"

    if artifact:
        for entry in record.artifacts:
            if entry.name == artifact:
                return absolute(entry.path)
        if record.artifacts:
            names = ", ".join(a.name for a in record.artifacts)
            raise NotFoundError(f"run {record.run} has no artifact {artifact!r}", hint=f"artifacts: {names}")
        return absolute(join_key("artifacts", artifact))
    chosen = next((a for a in record.artifacts if a.default), None) or next(
        (a for a in record.artifacts if a.name == "final"), None)
    return absolute(chosen.path) if chosen else absolute("artifacts")


def finetune_record(store: ObjectStore, run: str, model: str = "") -> ModelRecord:
    """The record a finetune directory describes: ``model.json`` plus ``artifacts.json`` (both optional)."""
    run_dir = layout.finetune_dir(run)
    meta: dict[str, Any] = {}
    try:
        meta = read_json(store, join_key(run_dir, "model.json"))
    except NotFoundError:
        pass
    if not isinstance(meta, dict):
        raise ConfigError(f"{run_dir}/model.json must be a JSON object")
    artifacts: list[Artifact] = []
    try:
        raw = read_json(store, join_key(run_dir, "artifacts.json"))
        items = raw.get("artifacts", []) if isinstance(raw, dict) else raw
        for item in items:
            artifacts.append(Artifact(name=str(item["name"]), path=check_key(str(item["path"]), what="artifact path"),
                                      kind=str(item.get("kind", "checkpoint")), default=bool(item.get("default"))))
    except NotFoundError:
        pass
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{run_dir}/artifacts.json: entries need name and path ({exc})") from None
    meta.pop("artifacts", None)
    record = structure_record({**meta, "run": run, "model": meta.get("model") or model or "unknown"}, run_dir)
    record.artifacts = artifacts
    record.registry_path = f"{layout.DATA_MOUNT}/{run_dir}"
    record.artifacts_index = f"{layout.DATA_MOUNT}/{run_dir}/artifacts.json"
    return record


def resolve_model_ref(ref: str, store: ObjectStore) -> ResolvedModel:
    """Turn a model reference into a checkpoint path inside the durable volume."""
    parsed = parse_model_ref(ref)
    if parsed.form == "finetune":
        run_dir = layout.finetune_dir(parsed.run)
        if not store.list(run_dir):
            raise NotFoundError(f"finetune run {parsed.run!r} was not found under {store.url}/{run_dir}")
        record = finetune_record(store, parsed.run)
        return ResolvedModel(ref, record.model, parsed.run, _checkpoint(record, run_dir, parsed.artifact), run_dir,
                             record)
    run = parsed.run
    if parsed.form == "alias":
        alias_key = layout.model_alias(parsed.model, parsed.alias)
        try:
            run = _converter.structure(read_json(store, alias_key), ModelAlias).run
        except NotFoundError:
            raise NotFoundError(f"model alias {parsed.model}:{parsed.alias} does not exist",
                                hint=f"set it with: tau data model alias set {parsed.model} {parsed.alias} RUN",
                                ) from None
    key = layout.model_run(parsed.model, run)
    try:
        record = structure_record(read_json(store, key), key)
    except NotFoundError:
        raise NotFoundError(f"model run {parsed.model}@{run} is not registered",
                            hint="run `tau data model index rebuild` to index finetune runs") from None
    run_dir = record.registry_path.removeprefix(layout.DATA_MOUNT + "/") or layout.finetune_dir(run)
    return ResolvedModel(ref, parsed.model, run, _checkpoint(record, check_key(run_dir), ""), key, record)


def resolve(ref: str, registry: str = "pvc", **options: Any) -> ResolvedModel:
    """What ``tau serve --from-model`` calls: open ``registry`` through the storage registry and resolve ``ref``.

    ``options`` go to the backend (for ``pvc``: ``namespace``, ``context``, ``kubeconfig``).
    """
    from tau_core.storage import open_store

    return resolve_model_ref(ref, open_store(registry, **options))
