"""The Lightning logger behind ``tau.stellar.StellarLogger`` (optional: needs ``lightning``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau._errors import TauSDKError


def _base() -> type:
    try:
        from lightning.pytorch.loggers.logger import Logger
    except ImportError:
        try:
            from pytorch_lightning.loggers.logger import Logger
        except ImportError:
            raise TauSDKError("tau-py: tau.stellar.StellarLogger needs Lightning (pip install lightning)") from None
    return Logger  # type: ignore[no-any-return]


def make_logger(project: str | None = None, run: str | None = None, **kw: Any) -> Any:
    from tau import stellar

    base = _base()

    class StellarLogger(base):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            self._run = stellar.init(project=project, run=run, **kw)

        @property
        def name(self) -> str:
            return self._run.project

        @property
        def version(self) -> str:
            return self._run.run_id

        def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
            data = params if isinstance(params, Mapping) else vars(params)
            (self._run.packet / "hparams.json").write_text(
                __import__("json").dumps(dict(data), default=str, sort_keys=True), encoding="utf-8")

        def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
            self._run.log(metrics, step)

        def finalize(self, status: str) -> None:
            state = "succeeded" if status in ("success", "finished") else "failed"
            self._run.finish(state=state)

    return StellarLogger()
