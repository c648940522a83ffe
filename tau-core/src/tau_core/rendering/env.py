"""Container environment: reserved keys, literal limits, user env and secrets, retry env, merging."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.rendering.constants import (
    MAX_LITERAL_ENV_TOTAL_BYTES,
    MAX_LITERAL_ENV_VALUE_BYTES,
    REDACTED,
    SETTABLE_TAU_ENV,
)

if TYPE_CHECKING:
    from tau_core.rendering.engine import RenderRequest

# -- environment --------------------------------------------------------------------------------------


def reserved_env_keys(names: Iterable[str], *, allow_nccl: bool = False, extra: Iterable[str] = ()) -> list[str]:
    """The names in ``names`` that Tau owns (``TAU_*`` except the settable ones, MASTER_*, NCCL_*)."""
    extra_set = set(extra)
    bad = []
    for name in names:
        if name.upper().startswith("TAU_") and name not in SETTABLE_TAU_ENV:
            bad.append(name)
        elif name in ("MASTER_ADDR", "MASTER_PORT") or name in extra_set:
            bad.append(name)
        elif name.startswith("NCCL_") and not allow_nccl:
            bad.append(name)
    return sorted(bad)


def check_reserved_env(user_env: Mapping[str, Any], *, allow_nccl: bool, extra: Iterable[str] = ()) -> None:
    bad = reserved_env_keys(user_env, allow_nccl=allow_nccl, extra=extra)
    if bad:
        raise ConfigError(
            f"runtime.env contains Tau-managed keys that cannot be overridden: {', '.join(bad)}",
            hint="remove them from runtime.env (settable TAU_ keys: " + ", ".join(SETTABLE_TAU_ENV) + ")",
        )


def check_env_limits(env: Sequence[Mapping[str, Any]]) -> None:
    """64 KiB per literal value and 128 KiB in total (``len(name)+1+len(value)+1``); refs excluded."""
    total = 0
    for entry in env:
        if "value" not in entry:
            continue
        name = str(entry["name"])
        size = len(str(entry["value"]).encode())
        if size > MAX_LITERAL_ENV_VALUE_BYTES:
            raise ConfigError(
                f'literal environment variable "{name}" is {size} bytes; maximum is {MAX_LITERAL_ENV_VALUE_BYTES} bytes',  # noqa: E501
                hint="publish source or artifacts once and reference a digest-pinned OCI image with run.source "
                "instead of embedding content in environment variables",
            )
        total += len(name.encode()) + 1 + size + 1
    if total > MAX_LITERAL_ENV_TOTAL_BYTES:
        raise ConfigError(
            f"literal environment payload is {total} bytes; maximum is {MAX_LITERAL_ENV_TOTAL_BYTES} bytes",
            hint="publish source or artifacts once and reference a digest-pinned OCI image with run.source "
            "instead of embedding content in environment variables",
        )


def redact_secrets(request: RenderRequest) -> bool:
    flag = request.context.redact_secrets
    if flag is None:
        return request.context.dry_run == "client"
    return bool(flag)


def user_env(request: RenderRequest) -> list[dict[str, Any]]:
    """``runtime.env`` (literal, sorted) and ``runtime.env_secret`` as ``secretKeyRef`` (never values)."""
    runtime = request.config.runtime
    literal = {str(k): "" if v is None else str(v) for k, v in (runtime.env or {}).items()}
    secrets = {str(k): str(v) for k, v in (runtime.env_secret or {}).items()}
    clash = sorted(set(literal) & set(secrets))
    if clash:
        name = clash[0]
        raise ConfigError(
            f"runtime.env_secret.{name} conflicts with runtime.env.{name}; set each env var in only one place",
            hint=f"remove {name} from runtime.env or from runtime.env_secret",
        )
    out: list[dict[str, Any]] = [{"name": k, "value": literal[k]} for k in sorted(literal)]
    redact = redact_secrets(request)
    for name in sorted(secrets):
        secret, sep, key = secrets[name].partition(":")
        if not sep or not secret or not key:
            raise ConfigError(
                f'runtime.env_secret.{name} must be "SECRET_NAME:KEY"',
                hint="reference an existing Secret and key; secret values never go into tau.yaml",
            )
        ref = {"name": REDACTED, "key": REDACTED} if redact else {"name": secret, "key": key}
        out.append({"name": name, "valueFrom": {"secretKeyRef": ref}})
    return out


def retry_env(request: RenderRequest) -> list[dict[str, str]]:
    """``TAU_RESUME_FROM`` and the ``TAU_RETRY_*`` quartet for retries and resumes."""
    env: list[dict[str, str]] = []
    retry = request.context.retry
    resume = request.context.resume_from
    if retry is not None:
        checkpoint = (
            resume or request.config.resilience.checkpoint_path or f"/data/checkpoints/finetunes/{request.name}"
        )
        env += [
            {"name": "TAU_RESUME_FROM", "value": str(checkpoint)},
            {"name": "TAU_RETRY_ATTEMPT", "value": str(retry.attempt)},
            {"name": "TAU_RETRY_MAX", "value": str(retry.max)},
            {"name": "TAU_RETRY_REASON", "value": retry.reason},
        ]
    elif resume:
        env.append({"name": "TAU_RESUME_FROM", "value": str(resume)})
    return env


def merge_env(*groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Concatenate env groups; a later entry with the same name replaces the earlier one in place."""
    order: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    for group in groups:
        for entry in group:
            name = str(entry["name"])
            if name not in merged:
                order.append(name)
            merged[name] = dict(entry)
    return [merged[n] for n in order]


def mark_cluster_workload(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """Set :data:`tau_core.keys.ENV_CLUSTER_JOB` to ``1`` in every container and init container of a pod.

    Every renderer calls it on every pod template it emits (Job, RayJob head and workers, RayService,
    Deployment): the SDK refuses ``.submit()`` when it sees the marker.  An entry of that name that is
    already there is overwritten in place, so no container can carry another value.
    """
    marker = {"name": keys.ENV_CLUSTER_JOB, "value": "1"}
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            env = container.setdefault("env", [])
            names = [str(e.get("name")) for e in env]
            if keys.ENV_CLUSTER_JOB in names:
                env[names.index(keys.ENV_CLUSTER_JOB)] = dict(marker)
            else:
                env.append(dict(marker))
    return pod_spec
