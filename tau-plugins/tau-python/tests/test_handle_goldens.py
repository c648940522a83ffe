"""Golden manifests of train, eval and serve handles (the example module), and their rendering.

Regenerate after an intended change with ``TAU_REGEN_SDK_GOLDENS=1 pytest <this file>`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import tau
from tau._staging import to_yaml

GOLDEN = Path(__file__).parent / "golden"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sdk-train-eval" / "workflow.py"


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TAU_REGEN_SDK_GOLDENS"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; create it with TAU_REGEN_SDK_GOLDENS=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden"


@pytest.fixture(scope="module")
def handles() -> dict[str, Any]:
    found = tau.workloads(EXAMPLE)
    return {h.kind: h for h in found}


def test_train_handle_golden(handles: dict[str, Any]) -> None:
    doc = handles["rayjob"].manifest(script="tau_user_module.py", generated=True)
    _check("train.yaml", to_yaml(doc))


def test_eval_handle_golden(handles: dict[str, Any]) -> None:
    train, ev = handles["rayjob"], handles["rayjob-eval"]
    assert train.upstream_path() == "/data/checkpoints/finetunes/sdk-train/artifacts/best/model.json"
    doc = ev.manifest(script="tau_user_module.py", generated=True, upstream_checkpoint=train.upstream_path())
    _check("eval.yaml", to_yaml(doc))


def test_serve_handle_golden(handles: dict[str, Any]) -> None:
    handle = tau.serve("sdk-serve", "h100-nvl-8node", from_finetune=handles["rayjob"], replicas=2,
                       import_path="serve_app:app", env={"MODEL_DIR": "/models",
                                                         "API_KEY": tau.secret_ref("serve-keys", "api")},
                       runtime_pip=["vllm"], port=8000, namespace="ray")
    doc: dict[str, Any] = {"spec": handle.spec(), "argv": handle.deploy_args(dry_run="client")}
    _check("serve.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")
    assert doc["argv"][:3] == ["serve", "deploy", "sdk-serve"]
    assert ["--from-finetune", "sdk-train"] == doc["argv"][7:9]
    assert "--env-secret" in doc["argv"] and "API_KEY=serve-keys:api" in doc["argv"]


def test_manifests_validate_against_the_managed_schema(handles: dict[str, Any]) -> None:
    import jsonschema

    from tau_core.config.managed import build_managed_schema

    schema = build_managed_schema()
    for handle in handles.values():
        jsonschema.validate(handle.manifest(script="m.py", generated=True, upstream_checkpoint="/data/x"), schema)
