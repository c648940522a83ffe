"""Logs that outlive their pods: the ``logs/<pod>-<container>.log`` files the entrypoint wrapper writes under a
run's output directory, read back through the same short-lived helper pod as ``tau run get``.

``tau logs`` prefers the live pods; when they are gone (TTL, cancel, node loss) it reads these archives, and
says so (for a deleted run, found with ``--path``/``--pvc`` or where the lifecycle recorder saw it write);
after that come the container logs the platform kept in Kusto (:mod:`.history_logs`, through the ``kusto``
history source), when a connection is given or configured.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Awaitable, Callable

from tau_core import keys
from tau_core.errors import NotFoundError, TauError
from tau_core.kube import KubeSession
from tau_core.lifecycle.base import ArtifactListing, LogOptions

from .artifacts import Artifacts, _clean_abs
from .objects import Obj, _ann

Emit = Callable[[str], Awaitable[None]]
ROTATED = ".log.1"


class NoLiveLogs(NotFoundError):
    """No pod of the run can be read (none left, or a RayJob whose cluster is gone)."""


class ArchivedLogs(Artifacts):
    async def _fallback_logs(self, session: KubeSession, ns: str, name: str, workload: Obj | None,
                             options: LogOptions, emit: Emit, cause: NotFoundError) -> None:
        """No live pod answered: the archived logs, else the run history, else ``cause``."""
        location = _archive_location(workload, options)
        if location is None and workload is None:  # deleted: where the recorder saw it write, if Kusto says
            from .history_logs import log_connection, recorded_location

            recorded = await recorded_location(await log_connection(session, self.sys_namespace, options), ns, name)
            location = (_clean_abs(recorded[0], "result_path"), recorded[1]) if recorded else None
        if location is not None:
            root, pvc = location
            if await self._archived_logs(session, ns, name, root, pvc, options, emit):
                return
        await self._history_logs(session, ns, name, options, emit, cause)

    async def _history_logs(self, session: KubeSession, ns: str, name: str, options: LogOptions, emit: Emit,
                            cause: NotFoundError) -> None:
        """Durable run history: the container logs the platform kept in Kusto (:mod:`.history_logs`), when a
        connection is given or configured; else the original error, with where to look next."""
        from .history_logs import FLAGS_HINT, kusto_logs, log_connection

        conn = await log_connection(session, self.sys_namespace, options)
        if conn.complete:
            await kusto_logs(conn, ns, name, options, emit, self._say)
            return
        hint = cause.hint or ""
        if options.archive_path is None:
            hint = (f"{hint}; " if hint else "") + (
                "if the run wrote to a PVC, pass --path <its storage.output> and --pvc <claim> to read the logs "
                f"it archived under {keys.LOGS_DIR}/")
        if conn.any:
            raise NotFoundError(cause.message, hint=f"historical log connection is incomplete; {FLAGS_HINT}")
        hint += f"; for the logs kept in Kusto, {FLAGS_HINT}"
        raise NotFoundError(cause.message, hint=hint)

    async def _archived_logs(self, session: KubeSession, ns: str, name: str, root: str, pvc: str,
                             options: LogOptions, emit: Emit) -> bool:
        """Print the archived logs under ``root/logs`` on ``pvc``; False when there are none."""
        logs_dir = posixpath.join(root, keys.LOGS_DIR)
        try:
            listing = await self._helper(session, ns, name, pvc, "list", logs_dir, root)
        except NotFoundError:
            return False
        if not isinstance(listing, ArtifactListing):
            return False
        streams = _archived_streams([str(e["path"]) for e in listing.entries], options.container)
        if not streams:
            return False
        self._say(f"{name}: no live pods; showing the logs archived on pvc/{pvc} under {logs_dir}/ "
                  f"({', '.join(stem + '.log' for stem, _ in streams)})")
        for stem, files in streams:
            lines: builtins.list[str] = []
            for file in files:
                data = await self._helper(session, ns, name, pvc, "file", posixpath.join(logs_dir, file), root)
                if isinstance(data, bytes):
                    lines += data.decode("utf-8", "replace").splitlines()
            if options.tail is not None and options.tail >= 0:
                lines = lines[-options.tail:] if options.tail else []
            for line in lines:
                await emit(f"[archive/{stem}] {line}" if options.prefix else line)
        return True


def _archive_location(workload: Obj | None, options: LogOptions) -> tuple[str, str] | None:
    """``(output dir, pvc)``: the flags, else the result location the workload declares."""
    if options.archive_path is not None and options.archive_pvc is not None:
        return _clean_abs(options.archive_path, "--path"), options.archive_pvc
    if options.archive_path is not None or options.archive_pvc is not None:
        raise TauError("pass both --path and --pvc to read archived logs of a deleted run, or neither")
    if workload is None:
        return None
    ann = _ann(workload)
    root, pvc = ann.get(keys.RESULT_PATH), ann.get(keys.RESULT_PVC)
    if not root or not pvc:
        return None
    return _clean_abs(root, keys.RESULT_PATH), pvc


def _archived_streams(paths: builtins.list[str],
                      container: str | None) -> builtins.list[tuple[str, builtins.list[str]]]:
    """``(pod-container, files oldest first)`` for each archived log directly under ``logs/``."""
    stems: dict[str, builtins.list[str]] = {}
    for path in sorted(paths):
        if "/" in path:
            continue
        if path.endswith(ROTATED):
            stem = path[: -len(ROTATED)]
        elif path.endswith(".log"):
            stem = path[: -len(".log")]
        else:
            continue
        if container and not stem.endswith(f"-{container}"):
            continue
        stems.setdefault(stem, [])
    for stem, files in stems.items():
        files += [f for f in (stem + ROTATED, stem + ".log") if f in paths]
    return sorted(stems.items())
