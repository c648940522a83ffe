"""Where a lifecycle verb (status, logs, get, cancel, resume, list) points: cluster and namespace.

Precedence (reference cli-surface §1.3–§1.5):

* **context**: ``--context``, else ``$TAU_CONTEXT``; an explicit context skips the repository's
  workspace connection and uses the ambient kubeconfig.  ``$TAU_CONTEXT`` naming a different context
  than the repository descriptor is an error (a typed ``--context`` never conflicts);
* otherwise the repository's connection descriptor is activated (isolated kubeconfig, pinned
  namespace and workspace);
* **namespace**: ``-n``, else ``--workspace``'s target namespace, else the connection's pinned
  namespace, else the cluster's primary workspace (resolved by the backend);
* **system namespace**: ``--system-namespace``, else the descriptor's, else ``$TAU_SYSTEM_NAMESPACE``,
  else ``tau-system``.

Outside a Git repository, without ``--context`` or ``-n``, lifecycle verbs refuse to guess.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError, UsageError
from tau_core.kube import DEFAULT_SYSTEM_NAMESPACE, ENV_CONTEXT, ENV_SYSTEM_NAMESPACE
from tau_core.lifecycle.base import ExecutionBackend, RunRef, backend_for


@dataclass
class LifecycleTarget:
    kubeconfig: str | None
    context: str | None
    namespace: str | None
    workspace: str | None
    system_namespace: str
    source: str  # flag | env | connection | kubeconfig
    backend_name: str = "kubernetes"

    def ref(self, name: str) -> RunRef:
        return RunRef(name, self.backend_name, self.namespace, self.context, self.workspace)

    def backend_options(self) -> dict[str, Any]:
        """What the registered backend's factory needs to reach this target's cluster."""
        return {"kubeconfig": self.kubeconfig, "context": self.context, "system_namespace": self.system_namespace}

    def backend(self, **options: Any) -> ExecutionBackend:
        """The registered backend for this target (:func:`tau_core.lifecycle.backend_for`)."""
        return backend_for(self, **options)


def _in_git_repo(start: Path) -> bool:
    start = start.resolve()
    return any((d / ".git").exists() for d in (start, *start.parents))


def lifecycle_target(*, context: str | None = None, namespace: str | None = None, workspace: str | None = None,
                     system_namespace: str | None = None, cwd: Path | None = None,
                     env: Mapping[str, str] | None = None,
                     confirm: Callable[[str, str], bool] | None = None) -> LifecycleTarget:
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    env_context = env.get(ENV_CONTEXT) or None
    explicit = context or env_context
    source = "flag" if context else ("env" if env_context else "kubeconfig")
    descriptor = None
    from tau_core.workspace.descriptor import find_descriptor, load_descriptor

    path = find_descriptor(cwd)
    if path is not None:
        descriptor = load_descriptor(path)
    if descriptor is not None and not context and env_context and descriptor.context_name != env_context:
        raise UsageError(f"$TAU_CONTEXT names context \"{env_context}\" but {path} names "
                         f"\"{descriptor.context_name}\"; pass --context to choose one")
    sys_ns = system_namespace or (descriptor.system_namespace if descriptor is not None else None) or \
        env.get(ENV_SYSTEM_NAMESPACE) or DEFAULT_SYSTEM_NAMESPACE
    if explicit:
        return LifecycleTarget(None, explicit, namespace, workspace, sys_ns, source)
    if descriptor is not None and not descriptor.is_local:
        from tau_core.workspace import connect
        from tau_core.workspace.connection import stdin_confirm

        conn = connect(descriptor, confirm=confirm or stdin_confirm, env=env)
        ns = namespace
        if ns is None and workspace in (None, conn.workspace):
            ns = conn.namespace
        return LifecycleTarget(conn.kubeconfig_path, conn.context_name, ns, workspace or conn.workspace,
                               system_namespace or conn.system_namespace or sys_ns, "connection")
    if not namespace and not workspace and not _in_git_repo(cwd):
        raise UsageError("lifecycle commands outside a Git repository require explicit --context or --namespace",
                         hint="cd into the repository, or pass --context and -n")
    return LifecycleTarget(None, None, namespace, workspace, sys_ns, "kubeconfig")


def check_name(name: str) -> str:
    """A run name as the lifecycle verbs accept it (a Kubernetes object name)."""
    import re

    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name or "") or len(name) > 253:
        from tau_core.output import clip

        raise ConfigError(f"\"{clip(name, 100)}\" is not a valid run name (lower-case letters, digits, '-' and '.')",
                          hint="use the name printed by `tau run` or shown by `tau run list`")
    return name
