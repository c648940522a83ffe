"""Where registry records live, as keys relative to a store's root (the PVC's ``/data``).

Defined once here so the CLI, the helper-pod workers and ``tau serve`` agree.
"""

from __future__ import annotations

import re

from tau_core.errors import UsageError
from tau_core.storage.base import join_key

#: where the registry store is mounted inside pods (the durable ``blob-training`` volume)
DATA_MOUNT = "/data"

DATASETS = "dataset-registry/datasets"
MODELS = "model-registry/models"
FINETUNES = "checkpoints/finetunes"

DATASET_RECORD = "dataset.json"
INGEST_STATUS = "ingest-status.json"

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_VERSION = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")


def slug(value: str, what: str) -> str:
    """A registry name segment: lowercase alphanumerics with inner hyphens."""
    if not _SLUG.match(value or "") or len(value) > 63:
        raise UsageError(f"{what} {value!r} must be lowercase alphanumerics with inner hyphens (at most 63)")
    return value


def version(value: str, what: str = "version") -> str:
    """A dataset version: like a slug, dots allowed inside (``2024.06``), never ``..``."""
    if not _VERSION.match(value or "") or ".." in value or len(value) > 63:
        raise UsageError(f"{what} {value!r} must be lowercase alphanumerics with inner dots or hyphens")
    return value


def dataset_dir(name: str, ver: str) -> str:
    return join_key(DATASETS, slug(name, "dataset name"), version(ver))


def dataset_record(name: str, ver: str) -> str:
    return join_key(dataset_dir(name, ver), DATASET_RECORD)


def dataset_status(name: str, ver: str) -> str:
    return join_key(dataset_dir(name, ver), INGEST_STATUS)


def dataset_aliases(name: str) -> str:
    return join_key(DATASETS, slug(name, "dataset name"), "aliases")


def dataset_alias(name: str, alias: str) -> str:
    return join_key(dataset_aliases(name), slug(alias, "alias") + ".json")


def model_run(model: str, run: str) -> str:
    return join_key(MODELS, slug(model, "model"), "runs", slug(run, "run") + ".json")


def model_alias(model: str, alias: str) -> str:
    return join_key(MODELS, slug(model, "model"), "aliases", slug(alias, "alias") + ".json")


def finetune_dir(run: str) -> str:
    return join_key(FINETUNES, slug(run, "run"))
