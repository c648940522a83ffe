"""Creating a run: preflights, idempotent creates keyed by the submission id, server dry runs, and the
delete-then-recreate step that retry and resume share."""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from tau_core import keys
from tau_core.errors import ConflictError, NotFoundError, TauError, UsageError
from tau_core.kube import KubeApiError, KubeSession, WriteOutcomeUnknown, api_path
from tau_core.lifecycle.base import RunRef, SubmitRequest, SubmitResult

from . import queue_gate
from .objects import (
    DEFAULT_PRIORITY_CLASSES,
    Obj,
    _all_containers,
    _ann,
    _labels,
    _labels_ref,
    _meta,
    _path_of,
    _pod_specs,
    new_submission_id,
)
from .targeting import Targeting

if TYPE_CHECKING:
    from tau_core.rendering.context import RenderContext


class Submit(Targeting):
    async def submit_async(self, session: KubeSession, request: SubmitRequest) -> SubmitResult:
        if not request.objects:
            raise TauError(f"nothing to submit for run {request.name}: the renderer produced no objects")
        objects = [json.loads(json.dumps(o)) for o in request.objects]
        workload = objects[0]
        ns = _meta(workload).get("namespace") or ""
        if not ns or ns.startswith("<"):
            raise UsageError("no namespace resolved for this workload: connect a workspace (see `tau workspace "
                             "list`) or pass --namespace")
        submission_id = _ann(workload).get(keys.SUBMISSION_ID) or request.submission_id or new_submission_id()
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("annotations", {})[keys.SUBMISSION_ID] = submission_id
            obj["metadata"].setdefault("namespace", ns)
        await self._preflight_secrets(session, ns, objects)
        await self._preflight_priorities(session, request, objects)
        ref = RunRef(request.name, "kubernetes", ns, session.context)
        if request.context.dry_run == "server":
            return await self._server_dry_run(session, ref, objects)
        queue = queue_gate.gate(objects)  # a run shipping a Secret is queued only once the Secret exists
        created_obj, created = await self._create_once(session, workload, submission_id)
        made: list[Obj] = []
        try:
            for obj in objects[1:]:
                if queue and obj.get("kind") == "Secret":
                    queue_gate.own(obj, created_obj)
                made_obj, made_now = await self._create_once(session, obj, submission_id)
                if made_now:
                    made.append(made_obj)
            if queue:
                await queue_gate.release(session, created_obj, queue)
        except BaseException:
            if created:
                await session.delete(_path_of(workload, named=True), propagation="Foreground",
                                     uid=_meta(created_obj).get("uid"))
                for obj in made if queue else []:  # the gate's Secrets: gone with the run, not left behind
                    await session.delete(_path_of(obj, named=True), uid=_meta(obj).get("uid"))
            raise
        kind = workload.get("kind", "")
        noun = "rayjob" if kind == "RayJob" else "job"
        profile = _labels(workload).get(keys.PROFILE)
        what = f"profile={profile}" if profile and kind == "Job" else f"kind={noun}"
        message = (f"submitted {request.name} ({what}, ns={ns})" if created
                   else f"recovered {request.name} from an earlier attempt of the same submission (ns={ns})")
        return SubmitResult(ref, created=created, message=message)

    async def _server_dry_run(self, session: KubeSession, ref: RunRef, objects: Sequence[Obj]) -> SubmitResult:
        out = [await session.create(_path_of(o), o, dry_run=True) for o in objects]
        self._dry_run_objects = out
        from tau_core.output import to_yaml

        text = "\n".join("---\n" + to_yaml(o).rstrip("\n") for o in out)
        return SubmitResult(ref, created=False,
                            message=f"server dry-run of {ref.name} (ns={ref.namespace}); the API server accepted:\n"
                                    + text)

    async def _create_once(self, session: KubeSession, obj: Obj, submission_id: str) -> tuple[Obj, bool]:
        """Create ``obj``; a retried or repeated create of the same submission recovers the existing object."""
        path = _path_of(obj)
        attempts = 0
        while True:
            attempts += 1
            try:
                return await session.create(path, obj), True
            except WriteOutcomeUnknown:
                if attempts >= 3:
                    raise
                await anyio.sleep(0.2 * attempts)
                continue  # safe: a second create of the same submission meets AlreadyExists below
            except KubeApiError as exc:
                if not exc.already_exists:
                    raise
            existing = await session.get(_path_of(obj, named=True), missing_ok=True)
            if existing is None:
                continue
            if _ann(existing).get(keys.SUBMISSION_ID) == submission_id:
                return existing, False
            meta = _meta(obj)
            resource = f"{obj.get('kind', '').lower()}"
            raise ConflictError(
                f"{resource} {meta.get('namespace')}/{meta.get('name')} already exists from another submission; "
                "refusing to reuse it for this tau run",
                hint=f"choose a distinct config name, cancel the existing workload with `tau run cancel "
                     f"{meta.get('name')}`, or use `tau run resume {meta.get('name')} --config ...` when explicitly "
                     "replacing a failed run")

    async def _preflight_secrets(self, session: KubeSession, ns: str, objects: Sequence[Obj]) -> None:
        for secret in _referenced_secrets(objects):
            try:
                found = await session.get(api_path("v1", "secrets", namespace=ns, name=secret), missing_ok=True)
            except KubeApiError as exc:
                if exc.status == 403:
                    continue  # the researcher may not read Secrets; the kubelet will report a missing one
                raise
            if found is None:
                raise NotFoundError(f"required Secret {ns}/{secret} does not exist",
                                    hint="ask your platform team to create it, or fix runtime.env_secret")

    async def _preflight_priorities(self, session: KubeSession, request: SubmitRequest,
                                    objects: builtins.list[Obj]) -> None:
        policy = request.config.policy
        explicit = {policy.workload_priority_class, policy.pod_priority_class}
        profile = request.context.workload_profile or {}
        if isinstance(profile, Mapping) and profile.get("priorities"):
            return  # classes chosen by the authoritative workload profile are never dropped
        workload = objects[0]
        wpc = _labels(workload).get(keys.KUEUE_PRIORITY_CLASS)
        pcs = {t.get("priorityClassName") for t in _pod_specs(workload)} - {None}
        candidates = [c for c in {wpc, *pcs} if c in DEFAULT_PRIORITY_CLASSES and c not in explicit]
        if not candidates:
            return
        missing: builtins.list[str] = []
        for cls in sorted(set(candidates)):
            for api, plural, what in (("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass"),
                                      ("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass")):
                try:
                    if await session.get(api_path(api, plural, name=cls), missing_ok=True) is None:
                        missing.append(f"{what} {cls}")
                except KubeApiError:
                    continue  # cannot verify (RBAC); keep the defaults
        if not missing:
            return
        from tau_core.output import warning

        warning(f"cluster is missing {', '.join(missing)}; omitting Tau default priority classes for this run "
                "(set policy.disable_default_priorities: true to make this explicit)")
        _labels_ref(workload).pop(keys.KUEUE_PRIORITY_CLASS, None)
        for spec in _pod_specs(workload):
            if spec.get("priorityClassName") in DEFAULT_PRIORITY_CLASSES:
                spec.pop("priorityClassName", None)

    def server_dry_run(self, request: SubmitRequest) -> builtins.list[Obj]:
        """The objects as the API server would store them (``--dry-run=server``), without creating them."""
        req = SubmitRequest(request.name, request.config, request.objects, request.context.evolve(dry_run="server"),
                            request.config_path, request.config_hash, request.submission_id, request.extra_env)
        self._dry_run_objects = []
        self._run(self.submit_async, req)
        return list(self._dry_run_objects)

    # -- replacing a workload (retry, resume) -----------------------------------------------
    def _rerender(self, request: SubmitRequest, context: RenderContext) -> builtins.list[Obj]:
        import os

        from tau_core.config.resolve import PASSED_ENV_PREFIXES
        from tau_core.rendering import RenderRequest, render

        submission_id = new_submission_id()
        # the same TAU_* policy env the first render saw (the offload sidecar's image and Kusto settings)
        env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES)}
        rendered = render(RenderRequest(name=request.name, config=request.config, context=context,
                                        config_hash=request.config_hash, submission_id=submission_id,
                                        config_dir=request.config_path.parent if request.config_path else None,
                                        env=env))
        if rendered:
            rendered[0].setdefault("metadata", {}).setdefault("annotations", {})[keys.SUBMISSION_ID] = submission_id
        return rendered

    async def _delete_and_wait(self, session: KubeSession, ns: str, name: str, workload: Obj,
                               timeout: float = 120.0) -> None:
        path = _path_of(workload, named=True)
        await session.delete(path, propagation="Foreground", uid=_meta(workload).get("uid"))
        await session.delete(api_path("v1", "services", namespace=ns, name=f"{name}-headless"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await session.get(path, missing_ok=True) is None:
                return
            await anyio.sleep(0.2)
        raise TauError(f"{ns}/{name} was not removed within {int(timeout)}s; nothing was resubmitted",
                       hint=f"check it with `tau run status {name}` and cancel it with `tau run cancel {name}`")


def _referenced_secrets(objects: Sequence[Obj]) -> list[str]:
    """Secrets the containers read that the run does not ship itself, in first-seen order."""
    names: list[str] = []
    shipped = {_meta(o).get("name") for o in objects if o.get("kind") == "Secret"}  # created with the run
    for obj in objects:
        for c in _all_containers(obj):
            for env in c.get("env") or []:
                ref = ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                if ref and ref not in names and ref not in shipped:
                    names.append(ref)
            for src in c.get("envFrom") or []:
                ref = (src.get("secretRef") or {}).get("name")
                if ref and ref not in names:
                    names.append(ref)
    return names
