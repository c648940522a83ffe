"""Loopback Azure stand-ins for AKS access tests: Entra ID, Resource Manager and the simulator as an AKS API server.

    with AzureFakes.start(tenant=TENANT) as azure:
        azure.attach_aks(sim_cluster, resource_id=RESOURCE_ID)   # ARM knows it; the simulator accepts Entra tokens
        env = azure.env()   # AZURE_AUTHORITY_HOST, TAU_AZURE_ARM_ENDPOINT, TAU_AZURE_CA_BUNDLE

Both servers listen on 127.0.0.1 over TLS with the simulator's throw-away test CA, so the real msal and
requests clients verify certificates as they would against Azure.  No Azure account is contacted.
See README.md (beside this file) for what the fakes leave out.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tau_testing.azure.arm import ArmFake, ManagedCluster
from tau_testing.azure.entra import APPROVE, DECLINE, EXPIRE, EntraFake, Identity
from tau_testing.uvicorn_thread import UvicornThread, listen

__all__ = [
    "APPROVE",
    "DECLINE",
    "EXPIRE",
    "ArmFake",
    "AzureFakes",
    "EntraFake",
    "Identity",
    "LoopbackTLSServer",
    "ManagedCluster",
]

DEFAULT_TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


class LoopbackTLSServer:
    """uvicorn serving an ASGI app on 127.0.0.1 (random port, TLS with the test CA) from a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.port = 0
        self.ca_path: Path | None = None
        self._serving: UvicornThread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> LoopbackTLSServer:
        from tau_testing.sim.tls import make_certificates

        holder = SimpleNamespace(ca_path=None, ca_data=None)
        ssl_options = make_certificates(holder)  # type: ignore[arg-type]
        self.ca_path = holder.ca_path
        sock = listen()
        self.port = sock.getsockname()[1]
        self._serving = UvicornThread(self.app, sock, name=f"azure-fake-{self.port}", what="loopback server",
                                      **ssl_options)
        self._serving.start()
        return self

    def stop(self) -> None:
        serving, self._serving = self._serving, None
        if serving is not None:
            serving.stop()


class AzureFakes:
    """An Entra fake and an ARM fake, served over loopback TLS."""

    def __init__(self, entra: EntraFake) -> None:
        self.entra = entra
        self.arm = ArmFake(entra)
        self._servers = [LoopbackTLSServer(entra.app()), LoopbackTLSServer(self.arm.app())]

    @classmethod
    def start(cls, tenant: str = DEFAULT_TENANT, identity: Identity | None = None) -> AzureFakes:
        identity = identity or Identity("00000000-0000-4000-8000-00000000a11c", "researcher@contoso.example",
                                        tenant, ("aurora-researchers",))
        fakes = cls(EntraFake({tenant}, identity))
        entra_server, arm_server = fakes._servers
        entra_server.start()
        arm_server.start()
        fakes.entra.url, fakes.arm.url = entra_server.url, arm_server.url
        return fakes

    @property
    def ca_path(self) -> Path:
        path = self._servers[0].ca_path
        assert path is not None
        return path

    def env(self) -> dict[str, str]:
        """What Tau reads to use these endpoints instead of Azure's (and trust the test CA for them)."""
        return {"AZURE_AUTHORITY_HOST": self.entra.url, "TAU_AZURE_ARM_ENDPOINT": self.arm.url,
                "TAU_AZURE_CA_BUNDLE": str(self.ca_path)}

    def attach_aks(self, cluster: Any, resource_id: str, *, server_app_id: str = "",
                   cluster_users: set[str] | None = None, tenant: str | None = None) -> ManagedCluster:
        """Register the simulated ``cluster`` as the AKS cluster ``resource_id`` and make its API server accept
        this Entra's tokens for the AKS server application (identity: UPN and group claims)."""
        from tau_testing.azure.arm import AKS_SERVER_APP_ID
        from tau_testing.sim.auth import User

        audience = server_app_id or AKS_SERVER_APP_ID

        def verify(token: str) -> User | None:
            issued = self.entra.verify(token, audience)
            if issued is None:
                return None
            return User(issued.identity.upn, list(issued.identity.groups), token="", uid=issued.identity.oid)

        cluster.users.verifiers.append(verify)
        return self.arm.add_cluster(ManagedCluster(
            resource_id, cluster.url, tenant or next(iter(self.entra.tenants)),
            ca_data=getattr(cluster, "ca_data", None),
            cluster_users={self.entra.identity.oid} if cluster_users is None else cluster_users))

    def stop(self) -> None:
        for server in self._servers:
            server.stop()

    def __enter__(self) -> AzureFakes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: the stand-in cluster's ARM ID and tenant (any UUIDs do; these are not real Azure objects)
TENANT = "11111111-2222-4333-8444-555555555555"
SUBSCRIPTION = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
RESOURCE_ID = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-aurora/providers/Microsoft.ContainerService/"
               "managedClusters/aurora-aks")


class AksStandIn:
    """A TLS simulated TauGrid cluster acting as the AKS cluster :data:`RESOURCE_ID`, behind the fakes."""

    def __init__(self, cluster: Any, scenario: Any, fakes: AzureFakes) -> None:
        self.cluster, self.scenario, self.fakes = cluster, scenario, fakes
        self.entra, self.arm = fakes.entra, fakes.arm
        self.tenant, self.resource_id = TENANT, RESOURCE_ID

    def descriptor(self, *, resource_id: str = RESOURCE_ID, tenant: str = TENANT,
                   context: str = "aurora-aks") -> str:
        return (f"schema: tau.workspace.connection.v1\nworkspace: {self.scenario.workspace}\n"
                f"cluster:\n  contextName: {context}\n  systemNamespace: tau-system\n"
                f"access:\n  method: aks\n  aks:\n    resourceID: {resource_id}\n    tenantID: {tenant}\n"
                "authorization:\n  mode: workspace-rbac\n  requiredRole: tau-researcher-v1\n"
                "requirements:\n  minTauVersion: 0.1.0\n")

    def stop(self) -> None:
        self.fakes.stop()
        self.cluster.stop()


def start_aks_stand_in(volume: Path, env: dict[str, str | None] | None = None) -> AksStandIn:
    """Start the simulator (TLS, TauGrid scenario) and the fakes; ``env`` (e.g. ``tau_env``) gets their variables."""
    from tau_testing.sim import SimCluster
    from tau_testing.sim.scenarios.taugrid import TauGridScenario

    cluster = SimCluster(clock="fake", tls=True).start()
    fakes: AzureFakes | None = None
    try:
        scenario = TauGridScenario.install(cluster, volume)
        fakes = AzureFakes.start(TENANT)
        fakes.attach_aks(cluster, RESOURCE_ID)
    except BaseException:
        if fakes is not None:
            fakes.stop()
        cluster.stop()
        raise
    if env is not None:
        env.update(fakes.env())
    return AksStandIn(cluster, scenario, fakes)


def age_token_cache(path: Path, seconds: float) -> int:
    """Move every cached access token's expiry ``seconds`` into the past, as if that much time had passed on
    the client (msal's cache format: ``AccessToken`` entries with epoch-second ``expires_on``).  Returns how many
    entries changed; the file keeps its mode."""
    import json

    doc = json.loads(path.read_text())
    entries = (doc.get("AccessToken") or {}).values()
    for entry in entries:
        entry["expires_on"] = str(int(entry["expires_on"]) - int(seconds))
        entry.pop("refresh_on", None)
    path.write_text(json.dumps(doc))
    return len(entries)
