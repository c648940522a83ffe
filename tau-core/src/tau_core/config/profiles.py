"""Offline workload-profile snapshots (``TauWorkloadProfileSnapshot``, doc 43) and profile selection.

Selection is fail closed: a snapshot is used only with ``--dry-run=client`` and explicit
``policy.namespace``/``policy.team``/``policy.lane``; stale, drifted, unready, forbidden or
ambiguous data stops rendering, and an explicit config value that contradicts an
authoritative profile field is reported rather than silently overridden.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.config.catalog import ACCEPTED_PROFILE_PLACEMENTS
from tau_core.config.issues import ConfigIssue, ConfigValidationError
from tau_core.config.loader import Document, load_yaml_file, require_mapping
from tau_core.errors import ConfigError
from tau_core.hashing import canonical_json, sha256_hex

if TYPE_CHECKING:
    from tau_core.workspace.profiles import WorkloadProfile

SNAPSHOT_API_VERSION = "tau.azure.com/v1alpha1"
SNAPSHOT_KIND = "TauWorkloadProfileSnapshot"
EXECUTION_TARGETS = ("singleCluster", "multiKueue")
#: The keys of a resolved profile (the controller's status.workloadProfiles.profiles[]): the normalized intent, the
#: Kueue/priority objects it resolved to (part of the profileSetHash) and the readiness fields (excluded from it).
PROFILE_KEYS = ("name", "description", "applicability", "gpusPerWorker", "workerCount", "mode", "placement",
                "defaultLocalQueue", "executionTarget", "priorities", "localQueues", "clusterQueues",
                "resourceFlavors", "topologies", "workloadPriorityClasses", "podPriorityClasses",
                "ready", "conditions", "observedGeneration")


def profile_set_hash(profiles: list[Mapping[str, Any]]) -> str:
    """The published ``profileSetHash``: SHA-256 hex (no ``sha256:`` prefix) of the canonical JSON of the
    resolved profiles, sorted by name, without readiness fields (``ready``, ``conditions``, ``observedGeneration``)."""
    items = []
    for p in sorted(profiles, key=lambda p: str(p.get("name", ""))):
        items.append({k: v for k, v in p.items() if k not in ("ready", "conditions", "observedGeneration")})
    return sha256_hex(canonical_json(items))


@dataclass
class SelectionRequest:
    """What the caller asks for: an optional explicit profile plus its authorization scope."""

    profile: str | None
    namespace: str | None
    team: str | None
    lane: str | None


@dataclass
class ProfileCatalog:
    """A ready revision of the workload profiles (from a snapshot or a connected cluster)."""

    generation: int
    set_hash: str
    profiles: list[dict[str, Any]]
    source: str  # "snapshot" | "cluster"
    origin: str = ""  # file path or cluster context
    document: Document | None = field(default=None, repr=False)

    def typed(self) -> list[WorkloadProfile]:
        """The profiles as :class:`tau_core.workspace.profiles.WorkloadProfile` (a malformed one is a ConfigError)."""
        from tau_core.workspace.profiles import read_profile

        where = f"workload profile in {self.source} {self.origin}".strip()
        return [read_profile(p, where) for p in self.profiles]


def _issue(doc: Document, path: tuple[Any, ...], message: str, hint: str | None = None) -> ConfigIssue:
    return doc.issue(path, ".".join(str(p) for p in path), message, hint)


def _check_revision(doc: Document, data: Mapping[str, Any], issues: list[ConfigIssue]) -> Any:
    """Known top-level keys, a positive generation, observed at that generation and ready; the generation."""
    known = {"apiVersion", "kind", "metadata", "tauClusterGeneration", "observedGeneration", "profileSetHash",
             "profiles", "conditions", "exportedAt", "cluster"}
    for key in data:
        if key not in known:
            issues.append(_issue(doc, (key,), f"unknown snapshot key {key!r}"))
    generation = data.get("tauClusterGeneration")
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        issues.append(_issue(doc, ("tauClusterGeneration",), "tauClusterGeneration must be a positive integer"))
    observed = data.get("observedGeneration", generation)
    if observed != generation:
        issues.append(_issue(doc, ("observedGeneration",), f"stale snapshot: profiles were observed at generation "
                             f"{observed} but the TauCluster is at generation {generation}",
                             "re-export after the controller reports WorkloadProfilesReady"))
    for i, cond in enumerate(data.get("conditions") or []):
        if isinstance(cond, dict) and cond.get("type") == "WorkloadProfilesReady":
            if str(cond.get("status")) != "True" or cond.get("observedGeneration", generation) != generation:
                issues.append(_issue(doc, ("conditions", i), "WorkloadProfilesReady is not True for this "
                                     "generation; the profile set is not ready", "re-export a ready revision"))
    return generation


def _check_profile(doc: Document, i: int, p: Any, names: set[str], issues: list[ConfigIssue]) -> None:
    """One published profile: known keys, a unique name, cardinality, mode, placement, target, queue."""
    where = ("profiles", i)
    if not isinstance(p, dict):
        issues.append(_issue(doc, where, "each profile must be a mapping"))
        return
    for key in p:
        if key not in PROFILE_KEYS:
            issues.append(_issue(doc, (*where, key), f"unknown profile key {key!r}"))
    name = p.get("name")
    if not isinstance(name, str) or not name:
        issues.append(_issue(doc, (*where, "name"), "profile name is required"))
    elif name in names:
        issues.append(_issue(doc, (*where, "name"), f"profile {name!r} appears more than once"))
    else:
        names.add(name)
    for key, lo in (("gpusPerWorker", 0), ("workerCount", 1)):
        v = p.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            issues.append(_issue(doc, (*where, key), f"{key} must be an integer >= {lo}"))
    if p.get("mode", "fixed") not in ("fixed", "elastic"):
        issues.append(_issue(doc, (*where, "mode"), f"mode {p.get('mode')!r} is invalid (allowed: fixed|elastic)"))
    if p.get("placement") not in ACCEPTED_PROFILE_PLACEMENTS:
        issues.append(_issue(doc, (*where, "placement"), f"placement {p.get('placement')!r} is invalid "
                             f"(allowed: {'|'.join(ACCEPTED_PROFILE_PLACEMENTS)})"))
    if p.get("executionTarget", "singleCluster") not in EXECUTION_TARGETS:
        issues.append(_issue(doc, (*where, "executionTarget"), "executionTarget must be singleCluster or "
                             "multiKueue"))
    if not isinstance(p.get("defaultLocalQueue"), str) or not p.get("defaultLocalQueue"):
        issues.append(_issue(doc, (*where, "defaultLocalQueue"), "defaultLocalQueue is required"))
    app = p.get("applicability", {})
    if not isinstance(app, dict) or any(k not in ("teams", "lanes", "namespaces") for k in app) or any(
            not isinstance(v, list) or not all(isinstance(x, str) for x in v) for v in app.values()):
        issues.append(_issue(doc, (*where, "applicability"), "applicability must map teams/lanes/namespaces "
                             "to lists of strings"))
    prio = p.get("priorities", {})
    if not isinstance(prio, dict):
        issues.append(_issue(doc, (*where, "priorities"), "priorities must be a mapping"))
    _check_bindings(doc, where, p, issues)


#: The per-profile queue bindings the controller observed (sets of object names).
BINDING_LISTS = ("clusterQueues", "resourceFlavors", "topologies", "workloadPriorityClasses", "podPriorityClasses")
LOCAL_QUEUE_KEYS = ("namespace", "name", "clusterQueue")


def _check_bindings(doc: Document, where: tuple[Any, ...], p: Mapping[str, Any], issues: list[ConfigIssue]) -> None:
    """``localQueues`` ({namespace, name, clusterQueue}) and the name lists, where present."""
    for key in BINDING_LISTS:
        value = p.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            issues.append(_issue(doc, (*where, key), f"{key} must be a list of object names"))
    queues = p.get("localQueues", [])
    if not isinstance(queues, list):
        issues.append(_issue(doc, (*where, "localQueues"), "localQueues must be a list"))
        return
    for j, q in enumerate(queues):
        if not isinstance(q, dict) or set(q) != set(LOCAL_QUEUE_KEYS) or not all(
                isinstance(q[k], str) and q[k] for k in LOCAL_QUEUE_KEYS):
            issues.append(_issue(doc, (*where, "localQueues", j), "each localQueues entry needs exactly namespace, "
                                 "name and clusterQueue (non-empty strings)"))


def _check_typed(doc: Document, profiles: list[Any], issues: list[ConfigIssue]) -> None:
    """Every profile also reads as the typed model (conditions, descriptions, ... of the right shape)."""
    from tau_core.workspace.profiles import read_profile

    for i, p in enumerate(profiles):
        try:
            read_profile(p)
        except ConfigError as exc:
            issues.append(_issue(doc, ("profiles", i), exc.message, exc.hint))


def load_snapshot(path: Path) -> ProfileCatalog:
    """Read and check a snapshot file; every problem is reported with its position."""
    doc = load_yaml_file(path)
    data = require_mapping(doc, "workload profile snapshot")
    issues: list[ConfigIssue] = []
    if data.get("apiVersion") != SNAPSHOT_API_VERSION or data.get("kind") != SNAPSHOT_KIND:
        issues.append(_issue(doc, ("kind",), f"not a workload profile snapshot: expected apiVersion "
                             f"{SNAPSHOT_API_VERSION} and kind {SNAPSHOT_KIND}",
                             "export one with tau cluster profiles export --output FILE"))
        raise ConfigValidationError(issues)
    generation = _check_revision(doc, data, issues)
    profiles = data.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        issues.append(_issue(doc, ("profiles",), "profiles must be a non-empty list"))
        raise ConfigValidationError(issues)
    names: set[str] = set()
    for i, p in enumerate(profiles):
        _check_profile(doc, i, p, names, issues)
    if not issues:
        _check_typed(doc, profiles, issues)
    set_hash = data.get("profileSetHash")
    if not isinstance(set_hash, str) or not set_hash:
        issues.append(_issue(doc, ("profileSetHash",), "profileSetHash is empty; the snapshot is not from a ready "
                             "profile set"))
    elif not issues and set_hash != profile_set_hash(profiles):
        issues.append(_issue(doc, ("profileSetHash",), "profileSetHash does not match the profiles: the snapshot "
                             "was edited or has drifted", "re-export it with tau cluster profiles export"))
    if issues:
        raise ConfigValidationError(issues)
    assert isinstance(generation, int)
    return ProfileCatalog(generation, str(set_hash), [dict(p) for p in profiles], "snapshot", doc.display,
                          doc)


def _ready(profile: Mapping[str, Any], generation: int) -> bool:
    if profile.get("ready") is False:
        return False
    for cond in profile.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return str(cond.get("status")) == "True" and cond.get("observedGeneration", generation) == generation
    observed = profile.get("observedGeneration")
    return observed is None or observed == generation


def _applies(profile: Mapping[str, Any], req: SelectionRequest) -> list[str]:
    """Reasons the caller is not authorized for ``profile`` (empty when it applies)."""
    app = profile.get("applicability") or {}
    reasons = []
    for key, value in (("namespaces", req.namespace), ("teams", req.team), ("lanes", req.lane)):
        allowed = app.get(key)
        if allowed and value not in allowed:
            reasons.append(f"{key[:-1]} {value!r} not in {allowed}")
    return reasons


def select_profile(catalog: ProfileCatalog, req: SelectionRequest) -> dict[str, Any]:
    """The single ready profile the request may use; otherwise a ConfigError that lists the choices."""
    by_name = {p["name"]: p for p in catalog.profiles}
    where = f"{catalog.source} {catalog.origin}".strip()
    if req.profile:
        p = by_name.get(req.profile)
        if p is None:
            raise ConfigError(f"workload profile {req.profile!r} is not in {where}; available: "
                              + ", ".join(sorted(by_name)), hint="set policy.profile to one of them")
        if not _ready(p, catalog.generation):
            raise ConfigError(f"workload profile {req.profile!r} is not Ready for generation {catalog.generation}",
                              hint="wait for the controller to report it Ready, then re-export")
        reasons = _applies(p, req)
        if reasons:
            raise ConfigError(f"workload profile {req.profile!r} does not authorize this run: " + "; ".join(reasons),
                              hint="fix policy.namespace/team/lane, or ask the platform team for access")
        return dict(p)
    candidates = [p for p in catalog.profiles if _ready(p, catalog.generation) and not _applies(p, req)]
    if len(candidates) == 1:
        return dict(candidates[0])
    if not candidates:
        raise ConfigError(f"no ready workload profile in {where} applies to namespace {req.namespace!r}, team "
                          f"{req.team!r}, lane {req.lane!r}; profiles: " + ", ".join(sorted(by_name)),
                          hint="set policy.profile, or adjust policy.namespace/team/lane")
    raise ConfigError("workload profile selection is ambiguous; applicable profiles: "
                      + ", ".join(sorted(p["name"] for p in candidates)), hint="set policy.profile to one of them")


#: config path -> (profile key reader, message name) for authoritative fields
def authoritative_values(profile: Mapping[str, Any], engine: str) -> dict[str, Any]:
    """Config values the profile decides (canonical dotted path -> value)."""
    prio = profile.get("priorities") or {}
    out: dict[str, Any] = {
        "policy.queue": profile.get("defaultLocalQueue"),
        "policy.mode": profile.get("mode", "fixed"),
        "policy.topology": profile.get("placement"),
        "policy.workload_priority_class": prio.get("workloadPriorityClassName"),
        "policy.pod_priority_class": prio.get("podPriorityClassName"),
        "policy.disable_default_priorities": prio.get("disableDefaultPriorities"),
    }
    if engine == "job":
        out["compute.gpus"] = profile.get("gpusPerWorker")
        out["execution.nodes"] = profile.get("workerCount")
    else:
        out["compute.workers"] = profile.get("workerCount")
        out["compute.gpus_per_worker"] = profile.get("gpusPerWorker")
    return {k: v for k, v in out.items() if v is not None}


EXCLUSIVE_WITH_PROFILE = ("policy.shape", "policy.gpu_class", "policy.node_selector", "policy.clear_node_selector")


def profile_conflicts(profile: Mapping[str, Any], engine: str, explicit: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config path, message) for every explicit config value that contradicts the profile."""
    name = profile.get("name")
    out: list[tuple[str, str]] = []
    for path, value in authoritative_values(profile, engine).items():
        if path in explicit and explicit[path] != value:
            out.append((path, f"{path}={explicit[path]} conflicts with authoritative workload profile {name!r} "
                              f"value {value!r}"))
    prio = profile.get("priorities") or {}
    if "policy.priority_tier" in explicit and (prio.get("workloadPriorityClassName") or
                                               prio.get("podPriorityClassName")):
        out.append(("policy.priority_tier", "policy.priority_tier cannot be combined with authoritative priority "
                                            f"classes from workload profile {name!r}; remove policy.priority_tier"))
    for path in EXCLUSIVE_WITH_PROFILE:
        if path in explicit:
            out.append((path, f"{path} cannot be combined with authoritative workload profile {name!r}; the "
                              "profile decides placement"))
    return out
