"""A loopback Azure Resource Manager serving one operation: AKS ``listClusterUserCredential``.

``POST /subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}/
listClusterUserCredential`` answers ``{"kubeconfigs": [{"name": "clusterUser", "value": <base64 kubeconfig>}]}``
like ARM does for an Entra-enabled cluster with ``format=exec``: the kubeconfig's user runs kubelogin with the
AKS server application as ``--server-id``.  Bearer tokens are checked against the Entra fake (audience = this
endpoint, tenant = the subscription's tenant); ARM's error bodies (``{"error": {"code", "message"}}``) cover a
missing cluster (404 ``ResourceNotFound``), a missing role (403 ``AuthorizationFailed``) and a token from the
wrong tenant (401 ``InvalidAuthenticationTokenTenant``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tau_testing.azure.entra import EntraFake

AKS_SERVER_APP_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"
KUBELOGIN_CLIENT_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"


@dataclass
class ManagedCluster:
    """An AKS cluster ARM knows: its API server (URL and CA) and who holds the Cluster User role."""

    resource_id: str
    server: str
    tenant: str
    ca_data: bytes | None = None
    cluster_users: set[str] = field(default_factory=set)  # Entra object ids
    static_credentials: bool = False  # local accounts: a token in the kubeconfig instead of kubelogin

    @property
    def name(self) -> str:
        return self.resource_id.rstrip("/").rsplit("/", 1)[-1]

    def kubeconfig(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.server}
        if self.ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_data).decode()
        user_name = f"clusterUser_{self.name}"
        if self.static_credentials:
            user: dict[str, Any] = {"token": "local-account-token"}
        else:
            user = {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
                "args": ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_SERVER_APP_ID,
                         "--client-id", KUBELOGIN_CLIENT_ID, "--tenant-id", self.tenant, "--login", "devicecode"],
                "env": None, "installHint": "kubelogin is not installed", "provideClusterInfo": False}}
        return {"apiVersion": "v1", "kind": "Config", "current-context": self.name,
                "clusters": [{"name": self.name, "cluster": cluster}],
                "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": user_name}}],
                "users": [{"name": user_name, "user": user}], "preferences": {}}


@dataclass
class ArmFake:
    entra: EntraFake
    clusters: dict[str, ManagedCluster] = field(default_factory=dict)
    url: str = ""
    requests: list[tuple[str, int]] = field(default_factory=list)

    def add_cluster(self, cluster: ManagedCluster) -> ManagedCluster:
        self.clusters[cluster.resource_id.lower()] = cluster
        return cluster

    def app(self) -> Starlette:
        path = ("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/"
                "{name}/listClusterUserCredential")
        return Starlette(routes=[Route(path, self._list_user_credential, methods=["POST"])])

    async def _list_user_credential(self, request: Request) -> JSONResponse:
        response = self._answer(request)
        self.requests.append((request.url.path, response.status_code))
        return response

    def _answer(self, request: Request) -> JSONResponse:
        if not request.query_params.get("api-version"):
            return _error(400, "MissingApiVersionParameter", "The api-version query parameter is required.")
        auth = request.headers.get("authorization", "")
        issued = self.entra.verify(auth[7:], self.url) if auth.lower().startswith("bearer ") else None
        if issued is None:
            return _error(401, "InvalidAuthenticationToken", "The access token is missing, invalid or expired.")
        resource_id = request.url.path.removesuffix("/listClusterUserCredential")
        cluster = self.clusters.get(resource_id.lower())
        sub_tenant = cluster.tenant if cluster is not None else next(
            (c.tenant for c in self.clusters.values() if c.resource_id.lower().split("/")[2] ==
             request.path_params["sub"].lower()), issued.tenant)
        if issued.tenant != sub_tenant:
            return _error(401, "InvalidAuthenticationTokenTenant", "The access token is from the wrong issuer. It "
                          "must match the tenant associated with this subscription.")
        if cluster is None:
            return _error(404, "ResourceNotFound", "The Resource 'Microsoft.ContainerService/managedClusters/"
                          f"{request.path_params['name']}' under resource group '{request.path_params['rg']}' "
                          "was not found.")
        if issued.identity.oid not in cluster.cluster_users:
            return _error(403, "AuthorizationFailed", f"The client '{issued.identity.upn}' with object id "
                          f"'{issued.identity.oid}' does not have authorization to perform action "
                          "'Microsoft.ContainerService/managedClusters/listClusterUserCredential/action'.")
        value = base64.b64encode(yaml.safe_dump(cluster.kubeconfig(), sort_keys=False).encode()).decode()
        return JSONResponse({"kubeconfigs": [{"name": "clusterUser", "value": value}]})


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
