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
    register("local", "tau_core.local.backend:LocalBackend",
             help="supervised local processes on this machine")
