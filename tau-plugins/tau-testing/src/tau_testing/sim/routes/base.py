"""What every route family of ``ApiApp`` shares: the cluster it serves and the request helpers."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from tau_testing.sim import errors
from tau_testing.sim.errors import ApiError
from tau_testing.sim.resources import ResourceType
from tau_testing.sim.routes.wire import PATCH_TYPES, Request

if TYPE_CHECKING:
    from tau_testing.sim.cluster import SimCluster
    from tau_testing.sim.store import Store


class RouteBase:
    """The state the route mixins read; ``ApiApp`` sets it."""

    cluster: SimCluster
    store: Store
    closing: asyncio.Event | None

    def _dry_run(self, request: Request, body: Any = None) -> bool:
        values = request.query.get("dryRun") or []
        if isinstance(body, dict) and isinstance(body.get("dryRun"), list):
            values = values + body["dryRun"]
        for value in values:
            if value != "All":
                raise errors.bad_request(f'Invalid dryRun value: "{value}": supported values: "All"')
        return bool(values)

    @staticmethod
    def _apply_body(request: Request) -> Any:
        text = request.body.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            import yaml

            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"the apply configuration is neither JSON nor YAML: {exc}") from exc

    def _patch_type(self, request: Request) -> str:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None:
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types include: "
                           f"application/json-patch+json, application/merge-patch+json, "
                           f"application/strategic-merge-patch+json, application/apply-patch+yaml "
                           f"(got {content_type!r})")
        return patch_type

    def _table(self, request: Request, rtype: ResourceType, items: list[dict[str, Any]],
               meta: dict[str, Any]) -> dict[str, Any] | None:
        """A Table of ``items`` when the client asked for one (``kubectl get``), else None."""
        from tau_testing.sim import tables

        if not tables.wants_table(request.headers.get("accept", "")):
            return None
        crd = None
        if rtype.custom:
            crd = self.store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                                 f"{rtype.plural}.{rtype.group}")
        columns = tables.columns_for(rtype, crd)
        return tables.table(rtype, items, self.cluster.clock.now(), columns, request.param("includeObject"), meta)

