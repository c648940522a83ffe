"""Kubeconfig files: which to read, loading and merging them, and writing private copies (0600).

Split out of :mod:`tau_core.kube`, which re-exports every name; PyYAML's C loader (a dependency of
kubernetes-asyncio) parses them, ruamel as the fallback.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_core.errors import ClusterError, ConfigError
from tau_core.fsutil import write_json_atomic

ENV_KUBECONFIG = "KUBECONFIG"
#: where the kubelet mounts a pod's ServiceAccount token and the cluster CA
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER = "in-cluster"


def in_cluster_config(env: Mapping[str, str] | None = None, sa_dir: Path | None = None) -> dict[str, Any] | None:
    """The pod's ServiceAccount as a kubeconfig dict (the API server at ``KUBERNETES_SERVICE_HOST``/``_PORT``,
    verified with the mounted CA), or None when this process does not run in a pod."""
    env = os.environ if env is None else env
    directory = SERVICE_ACCOUNT_DIR if sa_dir is None else sa_dir
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT") or "443"
    token_file = directory / "token"
    if not host or not token_file.is_file():
        return None
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the ServiceAccount token {token_file}: {exc.strerror or exc}",
                          hint="check the pod's automountServiceAccountToken and its projected volume") from exc
    server = f"https://{'[' + host + ']' if ':' in host else host}:{port}"
    return {"apiVersion": "v1", "kind": "Config", "current-context": IN_CLUSTER,
            "clusters": [{"name": IN_CLUSTER, "cluster": {"server": server,
                                                          "certificate-authority": str(directory / "ca.crt")}}],
            "users": [{"name": IN_CLUSTER, "user": {"token": token}}],
            "contexts": [{"name": IN_CLUSTER, "context": {"cluster": IN_CLUSTER, "user": IN_CLUSTER}}]}


def kubeconfig_paths(explicit: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None) -> list[Path]:
    """The kubeconfig files to read: an explicit path, else ``KUBECONFIG``, else ``~/.kube/config``."""
    env = os.environ if env is None else env
    if explicit:
        return [Path(explicit).expanduser()]
    value = env.get(ENV_KUBECONFIG, "")
    if value:
        return [Path(p).expanduser() for p in value.split(os.pathsep) if p]
    return [Path(env.get("HOME") or Path.home()) / ".kube" / "config"]


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror or exc}",
                          hint="check the path in KUBECONFIG or --kubeconfig") from exc
    try:
        data = parse_yaml(text)
    except ValueError as exc:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {str(exc).splitlines()[0]}",
                          hint="repair the file, or point KUBECONFIG at a valid kubeconfig") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping", hint="point KUBECONFIG at a valid kubeconfig")
    return data


def parse_yaml(text: str) -> Any:
    """Parse kubeconfig text with PyYAML's C loader (a dependency of kubernetes-asyncio), else ruamel.

    A kubeconfig written as JSON (the isolated one :func:`write_private_kubeconfig` writes) is read
    with :mod:`json`, which spares importing a YAML parser; anything else goes to YAML.
    """
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # not JSON after all: YAML decides (and words the error)
    try:
        import yaml
    except ImportError:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            return YAML(typ="safe", pure=True).load(text)
        except YAMLError as exc:
            raise ValueError(str(exc)) from exc
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc)) from exc


@dataclass
class KubeConfig:
    """A merged kubeconfig (first file wins for each named entry, as kubectl does)."""

    paths: list[Path]
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    current_context: str = ""
    origin: dict[tuple[str, str], Path] = field(default_factory=dict)

    @classmethod
    def load(cls, explicit: str | os.PathLike[str] | None = None,
             env: Mapping[str, str] | None = None) -> KubeConfig:
        paths = kubeconfig_paths(explicit, env)
        existing = [p for p in paths if p.exists()]
        if not existing:
            shown = os.pathsep.join(str(p) for p in paths)
            raise ClusterError(
                f"no kubeconfig found (looked at {shown})",
                hint="connect the repository's workspace with `tau workspace connection`, set KUBECONFIG, "
                     "or pass --context with a valid kubeconfig",
            )
        config = cls(paths=existing)
        for path in existing:
            data = _load_yaml(path)
            if not config.current_context and data.get("current-context"):
                config.current_context = str(data["current-context"])
            for section, target in (("contexts", config.contexts), ("clusters", config.clusters),
                                    ("users", config.users)):
                for item in data.get(section) or []:
                    if isinstance(item, dict) and item.get("name") and item["name"] not in target:
                        target[item["name"]] = item
                        config.origin[(section, item["name"])] = path
        return config

    def context(self, name: str | None = None) -> tuple[str, dict[str, Any]]:
        """The named context (or the current one) as ``(name, context-dict)``."""
        chosen = name or self.current_context
        where = os.pathsep.join(str(p) for p in self.paths)
        if not chosen:
            raise ClusterError(f"kubeconfig {where} has no current context",
                               hint="pass --context (or set TAU_CONTEXT) to choose one")
        if chosen not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ClusterError(f"context \"{chosen}\" not found in kubeconfig {where} (available: {known})",
                               hint="pass --context with one of the available contexts, or fix TAU_CONTEXT")
        return chosen, self.contexts[chosen].get("context") or {}

    def server(self, context: str | None = None) -> str:
        _, ctx = self.context(context)
        cluster = self.clusters.get(ctx.get("cluster", "")) or {}
        return str((cluster.get("cluster") or {}).get("server", ""))

    def namespace(self, context: str | None = None) -> str | None:
        _, ctx = self.context(context)
        ns = ctx.get("namespace")
        return str(ns) if ns else None

    def isolate(self, context: str | None = None) -> dict[str, Any]:
        """A kubeconfig holding only one context, its cluster and its user (file paths made absolute)."""
        name, ctx = self.context(context)
        cluster_name, user_name = ctx.get("cluster", ""), ctx.get("user", "")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise ClusterError(f"context \"{name}\" refers to cluster \"{cluster_name}\", which the kubeconfig "
                               "does not define", hint="repair the kubeconfig entry for this context")
        user = self.users.get(user_name, {"name": user_name, "user": {}})
        cluster = _absolutize(cluster, "cluster", self.origin.get(("clusters", cluster_name)))
        user = _absolutize(user, "user", self.origin.get(("users", user_name)))
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "contexts": [{"name": name, "context": dict(ctx)}],
            "clusters": [cluster],
            "users": [user],
            "preferences": {},
        }


_FILE_FIELDS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


def _absolutize(entry: dict[str, Any], key: str, origin: Path | None) -> dict[str, Any]:
    body = dict(entry.get(key) or {})
    if origin is not None:
        for name in _FILE_FIELDS:
            value = body.get(name)
            if isinstance(value, str) and value and not os.path.isabs(value):
                body[name] = str((origin.parent / value).resolve())
    return {"name": entry.get("name"), key: body}


def write_private_kubeconfig(config: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``config`` to ``path`` atomically with mode 0600, creating its directory with mode 0700.

    JSON is valid YAML, so no YAML writer is needed (and reading it back skips the YAML parser).
    """
    target = Path(path)
    write_json_atomic(target, config, mode=0o600, durable=True, dir_mode=0o700)
    return target


def is_private(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is 0600 and its directory 0700 (what the isolated kubeconfig needs)."""
    p = Path(path)
    return (stat.S_IMODE(p.stat().st_mode) == 0o600 and stat.S_IMODE(p.parent.stat().st_mode) == 0o700)
