"""Model registry operations: records point at finetune artifacts; payloads never move."""

from __future__ import annotations

import json
from typing import Any

from tau_core.errors import ConfigError, NotFoundError, TauError, UsageError
from tau_core.modelref import ModelAlias, ModelRecord, PrimaryMetric, finetune_record, structure_record, unstructure
from tau_core.output import warning
from tau_core.storage import ObjectStore, join_key, layout

from .records import now

LOSS_LIKE = ("loss", "perplexity", "error", "wer", "cer", "mse", "mae")


def _dump(value: Any) -> bytes:
    return (json.dumps(unstructure(value), indent=2, sort_keys=True) + "\n").encode()


def default_direction(metric: str) -> str:
    return "lower" if any(w in metric.lower() for w in LOSS_LIKE) else "higher"


class ModelRegistry:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def _read(self, key: str) -> ModelRecord:
        try:
            data = json.loads(self.store.read(key).data)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{key}: not valid JSON ({exc.msg})") from None
        return structure_record(data, key)

    def list(self, model: str = "", tags: dict[str, str] | None = None) -> list[ModelRecord]:
        prefix = join_key(layout.MODELS, layout.slug(model, "model")) if model else layout.MODELS
        out = []
        for info in self.store.list(prefix):
            if "/runs/" not in info.key or not info.key.endswith(".json"):
                continue
            try:
                record = self._read(info.key)
            except TauError as exc:
                warning(f"skipping {info.key}: {exc}")
                continue
            if tags and any(record.tags.get(k) != v for k, v in tags.items()):
                continue
            out.append(record)
        return out

    def show(self, ref: str) -> ModelRecord:
        parts = ref.split("/")
        if len(parts) == 2:
            key = layout.model_run(parts[0], parts[1])
        elif len(parts) == 1:
            key = join_key(layout.finetune_dir(parts[0]), "model.json")
        else:
            raise UsageError(f"model ref {ref!r} must be MODEL/RUN or RUN")
        try:
            return self._read(key)
        except NotFoundError:
            raise NotFoundError(f"model run {ref} was not found in {self.store.url}",
                                hint="run `tau data model index rebuild` to index finetune runs") from None

    def best(self, model: str, metric: str = "", direction: str = "") -> ModelRecord:
        ranked = rank(self.list(model), metric, direction)
        if not ranked:
            raise NotFoundError(f"no run of model {model} has metric {metric or '(primary metric)'}")
        return ranked[0]

    def alias_set(self, model: str, alias: str, run: str) -> ModelAlias:
        key = layout.model_run(model, run)
        if not self._exists(key):
            self._missing(model, run)
        record = ModelAlias(model=model, alias=alias, run=run, record_path=key, updated_at=now())
        alias_key = layout.model_alias(model, alias)
        try:
            etag: str | None = self.store.read(alias_key).etag
        except NotFoundError:
            etag = None
        self.store.swap(alias_key, _dump(record), etag)  # the model alias overwrites (no user-facing CAS)
        return record

    def alias_get(self, model: str, alias: str) -> ModelAlias:
        from tau_core.modelref import _converter

        try:
            data = json.loads(self.store.read(layout.model_alias(model, alias)).data)
        except NotFoundError:
            raise NotFoundError(f"model alias {model}:{alias} does not exist") from None
        result: ModelAlias = _converter.structure(data, ModelAlias)
        return result

    def _exists(self, key: str) -> bool:
        try:
            self.store.read(key)
        except NotFoundError:
            return False
        return True

    def _missing(self, model: str, run: str) -> None:
        raise NotFoundError(f"model run {model}@{run} is not registered",
                            hint="run `tau data model index rebuild` first")

    def write(self, record: ModelRecord) -> str:
        key = layout.model_run(record.model, record.run)
        record.record_path = key
        try:
            etag: str | None = self.store.read(key).etag
        except NotFoundError:
            etag = None
        self.store.swap(key, _dump(record), etag)
        return key


def metric_value(record: ModelRecord, metric: str) -> float | None:
    name = metric or (record.primary_metric.name if record.primary_metric else "")
    if not name:
        return None
    if name in record.metrics:
        return record.metrics[name]
    if record.primary_metric and record.primary_metric.name == name:
        return record.primary_metric.value
    return None


def rank(records: list[ModelRecord], metric: str = "", direction: str = "") -> list[ModelRecord]:
    scored = [(metric_value(r, metric), r) for r in records]
    scored = [(v, r) for v, r in scored if v is not None]
    if not scored:
        return []

    def way(r: ModelRecord) -> str:
        if direction:
            return direction
        if not metric and r.primary_metric:
            return r.primary_metric.direction
        return default_direction(metric or (r.primary_metric.name if r.primary_metric else ""))

    reverse = way(scored[0][1]) == "higher"
    return [r for _v, r in sorted(scored, key=lambda vr: (vr[0], vr[1].run), reverse=reverse)]


def record_from_finetune(store: ObjectStore, run: str, model: str) -> ModelRecord:
    """Build a registry record from ``checkpoints/finetunes/<run>/`` (model.json, artifacts.json)."""
    record = finetune_record(store, run, model)
    record.created_at = record.created_at or now()
    if record.primary_metric is None and record.metrics:
        name = sorted(record.metrics)[0]
        record.primary_metric = PrimaryMetric(name=name, value=record.metrics[name], direction=default_direction(name))
    return record


def finetune_runs(store: ObjectStore) -> list[str]:
    runs = {info.key.split("/")[2] for info in store.list(layout.FINETUNES) if info.key.count("/") >= 3}
    return sorted(runs)
