"""Pod security (the Restricted profile, hardened sidecars) and payload digest annotations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.rendering.constants import RESTRICTED_UID
from tau_core.rendering.values import sha256_hex

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig

# -- security -------------------------------------------------------------------------------------------


def restricted_mode(config: RunConfig) -> bool:
    return config.runtime.security.mode == "restricted"


def hardened_container_security() -> dict[str, Any]:
    """What every Tau-generated sidecar gets regardless of mode: no privilege escalation, no caps."""
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def apply_restricted(pod_spec: dict[str, Any], *, fs_group: int | None = None, owner: str = "pod") -> None:
    """Apply the Kubernetes Restricted Pod Security fields to a pod spec and all its containers.

    Explicit non-zero user/group ids are kept; anything that contradicts the profile (root,
    privileged, privilege escalation, added capabilities, unconfined seccomp) is an error.
    """
    psc = dict(pod_spec.get("securityContext") or {})
    _check_owner(psc, owner)
    psc["runAsNonRoot"] = True
    psc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    if fs_group is not None:
        psc.setdefault("fsGroup", fs_group)
    pod_spec["securityContext"] = dict(sorted(psc.items()))
    for group in ("initContainers", "containers"):
        for container in pod_spec.get(group) or []:
            container["securityContext"] = restricted_container_security(
                container.get("securityContext") or {}, str(container.get("name", "?"))
            )


def restricted_container_security(current: Mapping[str, Any], name: str) -> dict[str, Any]:
    sc = dict(current)
    if sc.get("privileged"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with privileged container "{name}"',
            hint="remove privileged: true or drop runtime.security.mode",
        )
    if sc.get("allowPrivilegeEscalation"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with allowPrivilegeEscalation on container "{name}"',
            hint="remove allowPrivilegeEscalation or drop runtime.security.mode",
        )
    caps = sc.get("capabilities") or {}
    if caps.get("add"):
        raise ConfigError(
            f'runtime.security.mode=restricted conflicts with added capabilities on container "{name}"',
            hint="remove the added capabilities or drop runtime.security.mode",
        )
    _check_owner(sc, f'container "{name}"')
    sc["allowPrivilegeEscalation"] = False
    sc["capabilities"] = {"drop": ["ALL"]}
    sc["runAsNonRoot"] = True
    sc.setdefault("runAsUser", RESTRICTED_UID)
    sc.setdefault("runAsGroup", RESTRICTED_UID)
    sc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    return dict(sorted(sc.items()))


def _check_owner(sc: Mapping[str, Any], owner: str) -> None:
    if sc.get("runAsNonRoot") is False:
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with runAsNonRoot=false on {owner}",
            hint="let the workload run as a non-root user",
        )
    if sc.get("runAsUser") == 0:
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with runAsUser=0 on {owner}", hint="use a non-zero user id"
        )
    seccomp = sc.get("seccompProfile") or {}
    if seccomp.get("type") == "Unconfined":
        raise ConfigError(
            f"runtime.security.mode=restricted conflicts with unconfined seccomp on {owner}",
            hint="use the RuntimeDefault seccomp profile",
        )


# -- payload digests ------------------------------------------------------------------------------------


def script_payload_digest(data: bytes) -> dict[str, str]:
    return {keys.SCRIPT_PAYLOAD_DIGEST: sha256_hex(data)}


def source_payload_digest(image: str, path: str, entrypoint: str) -> dict[str, str]:
    return {keys.PAYLOAD_DIGEST: sha256_hex(f"{image}\n{path}\n{entrypoint}")}
