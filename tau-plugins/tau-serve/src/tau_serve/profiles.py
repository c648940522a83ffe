"""Authorizing ``--profile`` for serving, fail closed (reference cli-surface §8.1).

The catalog comes from the TauCluster's published, ready profile set (read through the workload-profile
resolver of :mod:`tau_core.workspace.resolvers`) or, for an offline ``--dry-run=client``, from a
``TauWorkloadProfileSnapshot`` (:func:`tau_core.config.profiles.load_snapshot`).  Selection itself is
:func:`tau_core.config.profiles.select_profile`; the serving rules on top of it are here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from tau_core.config.profiles import ProfileCatalog, SelectionRequest, select_profile
from tau_core.errors import ConfigError, UsageError
from tau_core.workspace.profiles import multinode_rayservice


@attrs.define
class _Options:
    env: Mapping[str, str] | None = None


@attrs.define
class _Lookup:
    """The request shape the workload-profile resolver reads (connection, selection, options)."""

    connection: Mapping[str, Any]
    selection: SelectionRequest
    options: _Options


def snapshot_catalog(path: str) -> ProfileCatalog:
    from tau_core.config.profiles import load_snapshot

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--workload-profile-snapshot {path}: no such file",
                         hint="export one with tau cluster profiles export --output FILE")
    return load_snapshot(file)


def cluster_catalog(profile: str, namespace: str, context: str | None, kubeconfig: str | None = None) -> ProfileCatalog:
    """The TauCluster's ready profile set; no TauCluster or no published profiles -> fail closed."""
    from tau_core.workspace.resolvers import resolve_workload_profile

    lookup = _Lookup(connection={"context": context, "kubeconfig": kubeconfig},
                     selection=SelectionRequest(profile, namespace, None, None), options=_Options(dict(os.environ)))
    catalog = resolve_workload_profile(lookup)
    if not isinstance(catalog, ProfileCatalog):
        raise ConfigError("the cluster publishes no ready TauCluster workload profiles, so --profile cannot be "
                          "authorized", hint="ask the platform team to install TauGrid and publish serving profiles")
    return catalog


def authorize(catalog: ProfileCatalog, profile: str, namespace: str, kind: str) -> dict[str, Any]:
    """The ready profile ``profile`` if it authorizes serving ``kind`` in ``namespace``."""
    entry = next((p for p in catalog.profiles if p.get("name") == profile), None)
    team = lane = None
    if entry is not None:
        app = entry.get("applicability") or {}
        teams, lanes = list(app.get("teams") or []), list(app.get("lanes") or [])
        if len(teams) > 1 or len(lanes) > 1:
            raise ConfigError(f'workload profile "{profile}" authorizes several teams or lanes ({teams or lanes}); '
                              "serving needs a profile scoped to one", hint="ask the platform team for a serving "
                              "profile with a single team and lane")
        team = teams[0] if teams else None
        lane = lanes[0] if lanes else None
    selected = select_profile(catalog, SelectionRequest(profile, namespace, team, lane))
    check_serving_shape(selected, kind)
    return selected


def check_serving_shape(profile: Mapping[str, Any], kind: str) -> None:
    """Deployment: one worker. A multi-node RayService: :func:`tau_core.workspace.profiles.multinode_rayservice`."""
    name = profile.get("name")
    workers = int(profile.get("workerCount") or 1)
    if kind == "deployment" and workers != 1:
        raise ConfigError(f'--kind=deployment requires a single-worker profile; "{name}" has workerCount {workers}',
                          hint="choose a profile with workerCount 1, or use --kind=rayservice")
    if kind != "rayservice" or workers <= 1:
        return
    verdict = multinode_rayservice(profile, workers)
    if not verdict:
        raise ConfigError(f"cannot serve a multi-node RayService: {verdict.reason}",
                          hint="multi-node serving needs a fixed, same-network-domain, single-cluster GPU profile")


def check_queue(profile: Mapping[str, Any], namespace: str, queue: str, cluster_queue: str) -> None:
    """The profile's queue bindings (when it publishes them) must include the namespace's default LocalQueue."""
    name = profile.get("name")
    bound = str(profile.get("defaultLocalQueue") or "")
    problem = ""
    if bound and bound != queue:
        problem = f'is bound to LocalQueue "{bound}", but namespace "{namespace}" defaults to "{queue}"'
    locals_ = [q for q in profile.get("localQueues") or [] if isinstance(q, Mapping)]
    if not problem and locals_ and not any(q.get("namespace") == namespace and q.get("name") == queue
                                           for q in locals_):
        problem = f'does not list LocalQueue {namespace}/{queue} among its localQueues'
    cluster_queues = [str(q) for q in profile.get("clusterQueues") or []]
    if not problem and cluster_queue and cluster_queues and cluster_queue not in cluster_queues:
        problem = f'admits through ClusterQueues {cluster_queues}, not "{cluster_queue}" behind LocalQueue {queue}'
    if problem:
        raise ConfigError(f'workload profile "{name}" {problem}',
                          hint="choose a serving profile bound to this namespace's queue, or ask the platform team")
