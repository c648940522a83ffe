"""``tau workspace create``: render a ``workspace-rbac`` TauWorkspace, preflight it, and create it.

Preview (the default) reads the cluster but changes nothing.  ``--apply`` repeats the preflight,
requires the ClusterQueue's UID to be unchanged, asks the API server for a dry run, and then
creates the object; it never updates one.  A compatible existing workspace is a no-op.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from tau_core.errors import ConflictError, UsageError
from tau_core.kube import KubeApiError, KubeSession
from tau_workspace import names
from tau_workspace.intent import DEFAULT_QUEUE, Principal, WorkloadIdentity, WorkspaceIntent
from tau_workspace.preflight import cluster_queue_uid, require_same, workspace_slot
from tau_workspace.target import Target, taugrid_api

PROVIDERS = ("entra", "github")
SUBJECT_KINDS = ("Group", "User", "ServiceAccount")
PRIORITIES = ("default", "priority", "normal")


@attrs.frozen
class CreateRequest:
    """The flags of ``tau workspace create`` (None: the flag was not given)."""

    name: str
    namespace: str | None = None
    queue: str = DEFAULT_QUEUE
    principal_provider: str = "entra"
    principal_name: str | None = None
    subject_kind: str = "Group"
    subject_name: str | None = None
    output_root: str | None = None
    priority: str = "normal"
    service_account: str | None = None
    client_id: str | None = None


@attrs.frozen
class Outcome:
    """What the command prints: ``#`` comment lines, then the manifest (preview) or a result line."""

    comments: list[str]
    intent: WorkspaceIntent
    result: str | None = None


def _principal(req: CreateRequest) -> tuple[Principal, bool]:
    """The binding's principal, and whether it is the inert default."""
    inert = False
    if req.principal_name is None:
        if req.principal_provider != "entra" or req.subject_kind != "Group":
            raise UsageError(
                f"--principal-name is required for --principal-provider {req.principal_provider} with "
                f"--subject-kind {req.subject_kind}",
                hint="only an Entra Group binding may default to the workspace name")
        if names.is_uuid(req.name):
            raise UsageError("--principal-name is required when the workspace name is object-ID-shaped",
                             hint="a UUID-like workspace name could be mistaken for a real Entra group object ID")
        name, inert = req.name, True
    else:
        if not req.principal_name.strip():
            raise UsageError("--principal-name must not be blank; omit the flag entirely to default to the "
                             "workspace name")
        name = names.plain_text(req.principal_name, "--principal-name")
    subject = names.plain_text(req.subject_name, "--subject-name") if req.subject_name is not None else name
    if req.subject_kind == "ServiceAccount":
        names.dns_label(subject, "--subject-name")
    return Principal(req.principal_provider, name, req.subject_kind, subject), inert


def build_intent(req: CreateRequest, system_namespace: str) -> tuple[WorkspaceIntent, bool]:
    """Validate the flags (offline) and render the intent; the flag says whether the binding is inert."""
    name = names.dns_label(req.name, "workspace name")
    namespace = names.dns_label(req.namespace if req.namespace is not None else name, "--namespace")
    queue = names.dns_label(req.queue, "--queue")
    if queue != DEFAULT_QUEUE:
        raise UsageError(f'--queue must be "{DEFAULT_QUEUE}" for the v0 portable workspace',
                         hint="the controller binds the workspace to the baseline ClusterQueue of that name")
    for value, flag, allowed in ((req.principal_provider, "--principal-provider", PROVIDERS),
                                 (req.subject_kind, "--subject-kind", SUBJECT_KINDS),
                                 (req.priority, "--priority", PRIORITIES)):
        if value not in allowed:
            raise UsageError(f"{flag} must be one of: {', '.join(allowed)} (got {names.shown(value)})")
    if (req.service_account is None) != (req.client_id is None):
        raise UsageError("--service-account and --workload-identity-client-id must be set together")
    identity = None
    if req.service_account is not None and req.client_id is not None:
        identity = WorkloadIdentity(names.dns_label(req.service_account, "--service-account"),
                                    names.plain_text(req.client_id, "--workload-identity-client-id"))
    principal, inert = _principal(req)
    output_root = names.absolute_clean_path(req.output_root or f"/data/projects/{name}/runs", "--output-root")
    intent = WorkspaceIntent(name=name, system_namespace=system_namespace, namespace=namespace, queue=queue,
                             output_root=output_root, priority=req.priority, create_namespace=True,
                             principal=principal, workload_identity=identity)
    return intent, inert


def inert_notice(intent: WorkspaceIntent, *, exists: bool) -> str:
    fix = (f"name the real group with: kubectl edit workspaces.tau.azure.com {intent.name} -n "
           f"{intent.system_namespace}" if exists else "rerun with --principal-name <group>")
    return (f'# the RBAC subject defaulted to Group "{intent.name}", which no identity provider asserts, so this '
            f"workspace grants nobody access; {fix}")


Hook = Callable[[KubeSession], Awaitable[None]]


async def create(target: Target, intent: WorkspaceIntent, *, inert: bool, apply: bool,
                 between: Hook | None = None) -> Outcome:
    """Preflight, then (with ``apply``) preflight again under the UID guard, dry-run and create.

    ``between`` runs after the first preflight (tests use it to change the cluster at that moment).
    """
    async with taugrid_api(target) as session:
        slot = await workspace_slot(session, target, intent)
        uid = await cluster_queue_uid(session, intent.queue)
        comments = [inert_notice(intent, exists=slot == "compatible")] if inert else []
        if slot == "compatible":
            comments.append(f'# preflight passed: TauWorkspace "{intent.name}" already matches the requested v0 '
                            "workspace; no changes made")
        else:
            comments.append(f'# preflight passed: ClusterQueue "{intent.queue}" exists (uid={uid}); the '
                            "controller will create the Namespace, researcher RBAC, and LocalQueue")
        if not apply:
            return Outcome(comments, intent)
        if between is not None:
            await between(session)
        slot = await workspace_slot(session, target, intent)
        require_same(f'ClusterQueue "{intent.queue}"', uid, await cluster_queue_uid(session, intent.queue))
        if slot == "compatible":
            return Outcome(comments, intent, f'TauWorkspace "{intent.name}" already matches the requested v0 '
                                             "workspace; no changes made")
        await _create_once(session, target, intent)
    if inert:
        comments[0] = inert_notice(intent, exists=True)
    return Outcome(comments, intent, f"TauWorkspace {intent.system_namespace}/{intent.name} created; the "
                                     f"controller now creates Namespace {intent.namespace}, the researcher RBAC "
                                     f"and LocalQueue {intent.queue} (check: tau workspace check {intent.name})")


async def _create_once(session: KubeSession, target: Target, intent: WorkspaceIntent) -> None:
    path = target.workspaces_path()
    try:
        await session.create(path, intent.manifest(), dry_run=True)
        await session.create(path, intent.manifest())
    except KubeApiError as exc:
        if exc.already_exists:
            raise ConflictError(f'TauWorkspace "{intent.name}" was created by someone else during preflight; '
                                "nothing was changed", hint="rerun the command to compare it") from exc
        raise
