"""``tau.stellar.StellarLogger``: a Lightning logger that writes the Stellar packet.

Lightning is optional and heavy (it imports torch as soon as any of its modules is imported, even
``lightning.pytorch.loggers.logger``), so nothing here imports it until a logger is built:

* :class:`LoggerCore` implements Lightning's ``Logger`` API (``name``, ``version``, ``log_dir``,
  ``save_dir``, ``experiment``, ``log_metrics``, ``log_hyperparams``, ``save``, ``finalize``) on top of
  :mod:`tau.stellar`, with no Lightning import;
* ``StellarLogger(...)`` builds, on first use, the class ``LightningStellarLogger(StellarLogger,
  lightning.pytorch.loggers.Logger)`` (or ``pytorch_lightning``'s) and returns an instance of it, so
  ``isinstance(logger, lightning.pytorch.loggers.Logger)`` holds and Lightning's defaults
  (``after_save_checkpoint``, ``log_graph``, ``group_separator``) come from Lightning itself.

Mapping: metrics go to ``Run.log`` at Lightning's ``step`` (tensors through ``.item()``, non-numbers
dropped); a metric logged again at the same step (Lightning adds ``epoch`` to every call) keeps its first
value, so the packet holds one value per metric and step.  Hyperparameters (a dict or an
``argparse.Namespace``) are merged into the packet's ``config.json`` (values JSON can not hold become
strings).  ``save`` wakes the background writer (Lightning calls it after every ``log_metrics``; nothing
is written on the training thread); ``finalize("success")`` / ``finalize("failed")`` finish the run as
succeeded / failed; any other status (``"finished"``: a requeue signal) only writes the buffer and
leaves the run open.  Only global rank 0 writes.
"""

from __future__ import annotations

import json
import os
from argparse import Namespace
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tau._errors import TauSDKError

_FINAL = {"success": "succeeded", "failed": "failed"}
_RANK_ENV = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
_LIGHTNING_BASES = ("lightning.pytorch.loggers.logger", "pytorch_lightning.loggers.logger")


class _NoExperiment:
    """What ``experiment`` is on ranks other than 0: every method call does nothing."""

    def __getattr__(self, _name: str) -> Callable[..., None]:
        return lambda *_a, **_k: None


class LoggerCore:
    """Lightning's ``Logger`` API over a :class:`tau.stellar.Run` (created lazily, on rank 0 only)."""

    def __init__(self, project: str | None = None, run: str | None = None, *, group: str | None = None,
                 experiment: str | None = None, store: str | None = None, config: Mapping[str, Any] | None = None,
                 dir: str | os.PathLike[str] | None = None) -> None:
        from tau import stellar

        self._project = stellar.project_name(project)
        self._version = stellar.run_name(run)  # fixed now, so every rank and a restart agree on it
        self._options: dict[str, Any] = {"group": group, "experiment": experiment, "store": store,
                                         "config": dict(config or {}), "dir": dir}
        self._run: stellar.Run | None = None
        self._step_seen: tuple[int | None, set[str]] = (None, set())

    # -- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._project

    @property
    def version(self) -> str:
        return self._version

    @property
    def log_dir(self) -> str:
        from tau import stellar

        return str(stellar.packet_dir(self._project, self._version, self._options["dir"]))

    @property
    def save_dir(self) -> None:
        """None: checkpoints go under the Trainer's ``default_root_dir``, not into the Stellar packet."""
        return None

    @property
    def experiment(self) -> Any:
        """The :class:`tau.stellar.Run` (opened on first use); a do-nothing object on other ranks."""
        if self._rank() != 0:
            return _NoExperiment()
        if self._run is None:
            from tau import stellar

            opts = self._options
            self._run = stellar.init(project=self._project, run=self._version, group=opts["group"],
                                     experiment=opts["experiment"], store=opts["store"], config=opts["config"],
                                     dir=opts["dir"])
        return self._run

    def _rank(self) -> int:
        """Global rank from the launcher's environment (the Lightning class asks Lightning instead)."""
        for name in _RANK_ENV:
            value = os.environ.get(name)
            if value and value.isdigit():
                return int(value)
        return 0

    # -- logging -----------------------------------------------------------------------------
    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        if self._rank() != 0:
            return
        row = self._new_at_step(step, _scalars(metrics))
        if row:
            self.experiment.log(row, step)

    def _new_at_step(self, step: int | None, row: dict[str, float]) -> dict[str, float]:
        """Drop the metrics already logged at ``step`` (one value per metric and step; the first one wins)."""
        if step is None:
            self._step_seen = (None, set())
            return row
        seen_step, seen = self._step_seen
        if seen_step != step:
            seen = set()
            self._step_seen = (step, seen)
        fresh = {k: v for k, v in row.items() if k not in seen}
        seen.update(fresh)
        return fresh

    def log_hyperparams(self, params: Mapping[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        if self._rank() != 0:
            return
        data = vars(params) if isinstance(params, Namespace) else dict(params or {})
        run = self.experiment
        path: Path = run.packet / "config.json"
        current = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        current.update(_jsonable(data))
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(current, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def save(self) -> None:
        """Wake the background writer (Lightning calls this after every ``log_metrics``: it must stay cheap)."""
        if self._run is not None and not self._run.finished:
            self._run._wake.set()

    def finalize(self, status: str) -> None:
        if self._rank() != 0 or self._run is None or self._run.finished:
            return
        state = _FINAL.get(status)
        if state is None:  # "finished": a requeue/preemption signal; the run goes on after the restart
            self._run.flush()
            return
        self._run.finish(state=state)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable for spawned workers: the open run (threads, files) stays behind."""
        state = dict(self.__dict__)
        state["_run"] = None
        return state


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of ``metrics`` as floats (tensors and numpy scalars through ``.item()``; others dropped)."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        item = getattr(value, "item", None)
        if callable(item) and not isinstance(value, int | float):
            try:
                value = item()
            except (TypeError, ValueError, RuntimeError):  # a tensor of more than one element
                continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[str(key)] = float(value)
    return out


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, Namespace):
        return _jsonable(vars(value))
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError, RuntimeError):
            pass
    return getattr(value, "__name__", None) or str(value)


def _lightning_base() -> type:
    import importlib

    for module in _LIGHTNING_BASES:
        try:
            return importlib.import_module(module).Logger  # type: ignore[no-any-return]
        except ImportError:
            continue
    raise TauSDKError("tau-py: tau.stellar.StellarLogger needs Lightning (pip install 'tau-python[lightning]' "
                      "or lightning), which needs torch")


_built: dict[type, type] = {}


def lightning_class(base: type | None = None) -> type:
    """``LightningStellarLogger``: :class:`StellarLogger` plus Lightning's ``Logger`` (built once per base)."""
    import types

    base = base or _lightning_base()
    if base not in _built:
        rank_zero = _rank_zero_only(base)

        def _rank(self: LoggerCore) -> int:
            rank = getattr(rank_zero, "rank", None)
            return rank if isinstance(rank, int) else LoggerCore._rank(self)

        def body(ns: dict[str, Any]) -> None:
            ns.update({"_rank": _rank, "__module__": __name__, "__qualname__": "LightningStellarLogger"})

        _built[base] = types.new_class("LightningStellarLogger", (StellarLogger, base), exec_body=body)
    return _built[base]


def _rank_zero_only(base: type) -> Any:
    """Lightning's ``rank_zero_only`` next to ``base`` (its ``rank`` is the global rank the strategy set)."""
    import importlib

    package = base.__module__.split(".", 1)[0]
    module = "lightning.fabric.utilities.rank_zero" if package == "lightning" else f"{package}.utilities.rank_zero"
    try:
        return getattr(importlib.import_module(module), "rank_zero_only", None)
    except ImportError:
        return None


class StellarLogger(LoggerCore):
    """A Lightning logger writing to Stellar: ``Trainer(logger=tau.stellar.StellarLogger(project=..., run=...))``.

    Building one imports Lightning (and so torch); without Lightning it raises :class:`tau.TauSDKError`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> StellarLogger:
        if cls is StellarLogger:
            cls = lightning_class()
        return super().__new__(cls)


def __getattr__(name: str) -> Any:
    """``LightningStellarLogger`` by name, so a pickled logger unpickles in a spawned worker."""
    if name == "LightningStellarLogger":
        return lightning_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
