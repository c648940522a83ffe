"""The SDK is typed for its users: a module decorated with ``@tau.train``/``@tau.eval`` passes ``mypy --strict``
(no untyped decorator), and handle misuse is a type error."""

from __future__ import annotations

from pathlib import Path

from mypy import api  # the [test] extra installs mypy

USER_MODULE = '''\
import tau

@tau.train(name="typed-train", gpus=1, runtime_pip=["torch"], checkpoint_artifact="m.pt")
def train(ctx: tau.Ctx, lr: float = 0.1) -> float:
    return lr

@tau.eval(name="typed-eval", after="typed-train", runtime_pip=["torch"])
def evaluate(ctx: tau.Ctx) -> None:
    return None

direct: tau.TrainHandle = tau.train(name="direct", runtime_pip=["x"], entrypoint="/opt/train.py:main")
endpoint: tau.ServeHandle = tau.serve("llm", "serve-1x", from_finetune=train)
handle: tau.TrainHandle = train
ev: tau.EvalHandle = evaluate


def deploy() -> int:
    return endpoint.submit(dry_run="client").exit_code + train.submit(dry_run="client").exit_code
'''


def _mypy(tmp_path: Path, body: str) -> tuple[str, int]:
    module = tmp_path / "user_workflow.py"
    module.write_text(body)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n\n[mypy-tau_core.*]\nfollow_imports = skip\n")
    out, err, code = api.run([str(module), "--config-file", str(config), "--cache-dir", str(tmp_path / "cache")])
    return out + err, code


def test_a_decorated_user_module_passes_mypy_strict(tmp_path: Path) -> None:
    report, code = _mypy(tmp_path, USER_MODULE)
    assert code == 0, report


def test_misusing_a_handle_is_a_type_error(tmp_path: Path) -> None:
    report, code = _mypy(tmp_path, USER_MODULE + "x: int = train\nendpoint.submit(dry_run=1)\n")
    assert code == 1 and 'Incompatible types in assignment (expression has type "TrainHandle"' in report, report
    assert 'Argument "dry_run" to "submit" of "ServeHandle"' in report, report
