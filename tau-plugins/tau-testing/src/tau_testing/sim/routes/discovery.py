"""Discovery: /version, /api, /apis, the group and resource lists, and a skeletal OpenAPI v3."""

from __future__ import annotations

from typing import Any

from tau_testing.sim.errors import ApiError
from tau_testing.sim.routes.base import RouteBase
from tau_testing.sim.routes.wire import Request, Response


class DiscoveryRoutes(RouteBase):
    """The non-resource paths."""

    def version_info(self) -> dict[str, Any]:
        version = self.cluster.kubernetes_version.lstrip("v")
        major, _, rest = version.partition(".")
        minor, _, patch = rest.partition(".")
        return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
                "gitVersion": f"v{major}.{minor}.{patch or '0'}", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0",
                "compiler": "gc", "platform": "linux/amd64"}

    def _group_entry(self, group: str) -> dict[str, Any]:
        types = self.store.types
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in types.versions(group)]
        preferred = types.preferred_version(group) or versions[0]["version"]
        ordered = sorted(versions, key=lambda v: v["version"] != preferred)
        return {"name": group, "versions": ordered,
                "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred}}

    async def _non_resource(self, request: Request, response: Response) -> None:
        if request.method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        path = request.path
        parts = path.strip("/").split("/")
        types = self.store.types
        if path in ("/version", "/version/"):
            await response.json(200, self.version_info())
        elif path in ("/healthz", "/livez", "/readyz"):
            await response.text(200, "ok")
        elif path == "/api":
            await response.json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.cluster.host}:{self.cluster.port}"}]})
        elif path == "/apis":
            groups = [self._group_entry(g) for g in types.groups() if g]
            await response.json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif path == "/api/v1":
            await response.json(200, self._resource_list("", "v1"))
        elif len(parts) == 2 and parts[0] == "apis":
            if not types.versions(parts[1]):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, {"kind": "APIGroup", "apiVersion": "v1", **self._group_entry(parts[1])})
        elif len(parts) == 3 and parts[0] == "apis":
            if not types.in_group_version(parts[1], parts[2]):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, self._resource_list(parts[1], parts[2]))
        elif path == "/openapi/v3":
            gvs = [("", "v1")] + [(g, v) for g in types.groups() if g for v in types.versions(g)]
            index = {}
            for g, v in gvs:
                key = f"apis/{g}/{v}" if g else "api/v1"
                index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={self._gv_hash(g, v)}"}
            await response.json(200, {"paths": index})
        elif path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/"):].split("/")
            if rest[:2] == ["api", "v1"] and len(rest) == 2:
                group, version = "", "v1"
            elif len(rest) == 3 and rest[0] == "apis":
                group, version = rest[1], rest[2]
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if not types.in_group_version(group, version):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            await response.json(200, self._openapi_v3(group, version))
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _gv_hash(self, group: str, version: str) -> str:
        import hashlib

        names = ",".join(sorted(t.plural for t in self.store.types.in_group_version(group, version)))
        return hashlib.sha256(f"{group}/{version}:{names}".encode()).hexdigest()[:32].upper()

    def _openapi_v3(self, group: str, version: str) -> dict[str, Any]:
        """A skeletal OpenAPI v3 document: every resource's operations with their GVK and query parameters.
        It carries no schemas (kubectl then falls back to its built-in patch strategies)."""
        prefix = f"/apis/{group}/{version}" if group else "/api/v1"
        field_validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True},
                            "description": "Ignore, Warn or Strict"}
        dry_run = {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        paths: dict[str, Any] = {}
        for rtype in self.store.types.in_group_version(group, version):
            gvk = {"group": group, "version": version, "kind": rtype.kind}
            base = f"{prefix}/namespaces/{{namespace}}/{rtype.plural}" if rtype.namespaced else \
                f"{prefix}/{rtype.plural}"

            def op(action: str, params: list[dict[str, Any]], gvk: dict[str, str] = gvk,
                   kind: str = rtype.kind) -> dict[str, Any]:
                return {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
                        "operationId": f"{action}{kind}", "parameters": params,
                        "responses": {"200": {"description": "OK"}}}

            paths[base] = {"get": op("list", []), "post": op("post", [dry_run, field_validation])}
            paths[f"{base}/{{name}}"] = {
                "get": op("get", []), "put": op("put", [dry_run, field_validation]),
                "patch": op("patch", [dry_run, field_validation]), "delete": op("delete", [dry_run]),
                "parameters": [field_validation],
            }
            for sub in rtype.subresources:
                if sub in ("status", "scale"):
                    paths[f"{base}/{{name}}/{sub}"] = {"get": op("get", []),
                                                        "patch": op("patch", [dry_run, field_validation])}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes (tau-sim)", "version": self.version_info()[
            "gitVersion"]}, "paths": paths, "components": {"schemas": {}}}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for rtype in sorted(self.store.types.in_group_version(group, version), key=lambda t: t.plural):
            resources.extend(rtype.discovery_entries())
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": resources}
