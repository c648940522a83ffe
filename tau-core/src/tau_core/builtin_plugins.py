"""Hooks that tau-core itself implements, registered like any third-party plugin.

Kept import-light: targets are strings, imported only when used.
"""

from __future__ import annotations

from typing import Any

from tau_core.hookspecs import hookimpl


@hookimpl
def tau_register_execution_backends(register: Any) -> None:
    register("kubernetes", "tau_core.backends.kubernetes:KubernetesBackend",
             help="Jobs and RayJobs on a Kubernetes cluster, queued through Kueue")
    register("local", "tau_core.backends.local.backend:LocalBackend",
             help="supervised local processes on this machine")


@hookimpl
def tau_register_resolvers(register: Any) -> None:
    register("live-workspace-connection", "tau_core.workspace.resolvers:resolve_connection",
             kind="workspace-connection")
    register("live-workspace-defaults", "tau_core.workspace.resolvers:resolve_workspace_defaults",
             kind="workspace-defaults")
    register("live-workload-profile", "tau_core.workspace.resolvers:resolve_workload_profile",
             kind="workload-profile")


@hookimpl
def tau_register_gpu_class_rules(register: Any) -> None:
    register("builtin", "tau_core.gpu_catalog:BUILTIN_RULES", priority=-100,
             help="the AKS VM-size catalog (control-plane §2.2)")


@hookimpl
def tau_register_storage_backends(register: Any) -> None:
    register("file", "tau_core.storage.filesystem:FileStore",
             help="file://<dir>: a local directory (create-if-absent by hard link, compare-and-swap under flock)")
    register("pvc", "tau_core.storage.pvc:PvcStore",
             help="pvc: the workspace's blob-training volume through short-lived helper pods")
