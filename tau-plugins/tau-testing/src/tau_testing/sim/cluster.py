"""``SimCluster``: the store, clock, logs, controllers, faults and HTTP server of one simulated cluster."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from tau_testing.sim.auth import Authorizer, User, Users, default_rbac_objects
from tau_testing.sim.clock import FakeClock, RealClock
from tau_testing.sim.errors import ApiError
from tau_testing.sim.faults import FaultInjector, RequestLog
from tau_testing.sim.logs import LogBook
from tau_testing.sim.store import Store

DEFAULT_USERS: dict[str, list[str]] = {
    "admin": ["system:masters"],
    "alice": ["team-a"],
    "bob": ["team-b"],
    "carol": ["team-a", "team-b"],
    "mallory": [],
}

_CRD_MEMO: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
_CRD_MEMO_LOCK = threading.Lock()


def load_crd_documents(directory: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``directory`` (recursively), parsed once per process and cached on
    disk as JSON keyed by file names, sizes and modification times."""
    import hashlib
    import json

    files = sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
    signature = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    with _CRD_MEMO_LOCK:
        if signature in _CRD_MEMO:
            return _CRD_MEMO[signature]
        from tau_testing.paths import cache_dir

        digest = hashlib.sha256(repr(signature).encode()).hexdigest()[:20]
        cache = cache_dir() / f"crds-{digest}.json"
        docs: list[dict[str, Any]] | None = None
        try:
            docs = json.loads(cache.read_text())
        except (OSError, ValueError):
            docs = None
        if docs is None:
            import yaml

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            docs = []
            for path in files:
                try:
                    with path.open() as handle:
                        for doc in yaml.load_all(handle, Loader=loader):
                            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                                docs.append(doc)
                except yaml.YAMLError as exc:
                    raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from exc
            try:
                cache.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(docs))
                tmp.replace(cache)
            except OSError:
                pass
        _CRD_MEMO[signature] = docs
        return docs


class SimCluster:
    """A simulated Kubernetes cluster served over real HTTP on 127.0.0.1.

    ``clock="fake"``: controllers run only in ``settle()``/``advance()`` (and after every write through the API
    when ``auto_settle``). ``clock="real"``: a background thread reconciles every ``interval`` seconds and
    ``time_scale`` makes scripted durations pass faster.
    """

    def __init__(self, kubernetes_version: str = "1.30", clock: str | Any = "fake", tls: bool = False,
                 preload_crds: bool = True, *, auto_settle: bool = True, time_scale: float = 1.0,
                 start_time: datetime | None = None, users: dict[str, list[str]] | None = None,
                 crds_dir: str | Path | None = None, interval: float = 0.05,
                 bookmark_interval: float = 1.0) -> None:
        if isinstance(clock, str):
            if clock == "fake":
                self.clock: Any = FakeClock(start_time)
            elif clock == "real":
                self.clock = RealClock(time_scale)
            else:
                raise ValueError(f"clock must be 'fake' or 'real', not {clock!r}")
        else:
            self.clock = clock
        self.kubernetes_version = kubernetes_version
        self.tls = tls
        self.auto_settle = auto_settle
        self.interval = interval
        self.bookmark_interval = bookmark_interval
        self.store = Store(self.clock)
        self.store.kubernetes_version = kubernetes_version
        self.logs = LogBook(self.clock)
        # a deleted pod's logs go with it (a new pod of the same name starts with empty logs)
        self.store._subscribe(self._forget_pod_logs, raw=True)
        self.controllers: OrderedDict[str, Any] = OrderedDict()
        self.faults = FaultInjector()
        self.requests = RequestLog()
        self.scripts: Any = None
        self.process_kubelet: Any = None  # a tau_testing.sim.kubelet_process.ProcessKubelet once enabled
        self.users = Users()
        self.authorizer = Authorizer(self.store)
        from tau_testing.sim.vap import PolicyEnforcer

        self.store.admission_hooks.append(PolicyEnforcer(self.store))
        for obj in default_rbac_objects():
            self.store.create(obj)
        for name, groups in (users if users is not None else DEFAULT_USERS).items():
            self.users.add(name, groups)
        if preload_crds:
            self.preload_crds(crds_dir)
        self._settle_lock = threading.RLock()
        self._server: Any = None
        self._runner: threading.Thread | None = None
        self._stop = threading.Event()
        self.url = ""
        self.host = "127.0.0.1"
        self.port = 0
        self.ca_path: Path | None = None
        self.ca_data: bytes | None = None
        self.kubeconfig_path: Path | None = None
        self._tmpdir: Any = None
        self.settle_errors: list[BaseException] = []

    def _forget_pod_logs(self, event_type: str, obj: dict[str, Any], old: Any = None) -> None:
        if event_type == "DELETED" and obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1":
            meta = obj["metadata"]
            self.logs.forget(meta.get("namespace", ""), meta["name"])

    # -- setup -----------------------------------------------------------------------------------------------

    def preload_crds(self, directory: str | Path | None = None) -> int:
        from tau_testing.paths import crds_dir

        root = Path(directory) if directory is not None else crds_dir()
        if not root.is_dir():
            raise FileNotFoundError(f"CRD directory {root} does not exist; set TAU_CRDS_DIR to the folder holding "
                                    f"the Kueue and KubeRay CRDs")
        docs = load_crd_documents(root)
        for doc in docs:
            self.store.load_crd(doc)
        return len(docs)

    def add_controller(self, name: str, controller: Any) -> Any:
        if not hasattr(controller, "enabled"):
            controller.enabled = True
        self.controllers[name] = controller
        return controller

    def add_user(self, name: str, groups: Iterable[str] = ()) -> User:
        return self.users.add(name, list(groups))

    @property
    def tokens(self) -> dict[str, str]:
        return self.users.tokens

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace the stored one's spec/metadata when it exists (a test convenience)."""
        meta = obj.get("metadata") or {}
        existing = self.store.get(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta.get("name", ""))
        if existing is None:
            created = self.store.create(obj)
            if "status" in obj and "status" in self.store.rtype(obj["apiVersion"], obj["kind"]).subresources:
                created = self.store.update_status(dict(created, status=obj["status"]))
            return created
        merged = dict(obj)
        merged["metadata"] = dict(meta, resourceVersion=existing["metadata"]["resourceVersion"])
        updated = self.store.update(merged)
        if "status" in obj and "status" in self.store.rtype(obj["apiVersion"], obj["kind"]).subresources:
            updated = self.store.update_status(dict(updated, status=obj["status"]))
        return updated

    def load_scenario(self, source: str | Path | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Preload objects from a YAML file (multi-document, or a ``List``/``items``) or an iterable of dicts.
        Namespaces and CRDs go first so that the objects that need them can be created."""
        if isinstance(source, (str, Path)):
            import yaml

            path = Path(source)
            try:
                docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not valid YAML: {exc}") from exc
        else:
            docs = list(source)
        objects: list[dict[str, Any]] = []
        for doc in docs:
            if not isinstance(doc, dict):
                raise ValueError(f"scenario entries must be objects, found {type(doc).__name__}")
            if doc.get("kind", "").endswith("List") and "items" in doc:
                objects.extend(doc["items"] or [])
            elif "objects" in doc and "kind" not in doc:
                objects.extend(doc["objects"] or [])
            else:
                objects.append(doc)
        priority = {"CustomResourceDefinition": 0, "Namespace": 1}
        objects.sort(key=lambda o: priority.get(o.get("kind", ""), 2))
        return [self.apply(o) for o in objects]

    # -- controllers -----------------------------------------------------------------------------------------

    def settle(self, max_rounds: int = 100) -> int:
        """Run enabled controllers, in order, until none reports a change. Returns the number of rounds."""
        with self._settle_lock:
            for round_number in range(1, max_rounds + 1):
                changed = False
                for controller in list(self.controllers.values()):
                    if getattr(controller, "enabled", True) and controller.reconcile(self):
                        changed = True
                if not changed:
                    return round_number
            raise RuntimeError(f"controllers did not settle within {max_rounds} rounds")

    def _next_wakeup(self) -> datetime | None:
        wakeups: list[datetime] = []
        for controller in self.controllers.values():
            fn = getattr(controller, "next_wakeup", None)
            if getattr(controller, "enabled", True) and fn is not None:
                when = fn(self)
                if when is not None:
                    wakeups.append(when)
        return min(wakeups) if wakeups else None

    def advance(self, seconds: float) -> datetime:
        """Move a fake clock forward, stopping at every controller wake-up on the way, and settle."""
        if not getattr(self.clock, "is_fake", False):
            raise TypeError("advance() needs clock='fake'")
        with self._settle_lock:
            self.settle()
            target = self.clock.now().timestamp() + seconds
            while True:
                now = self.clock.now()
                wakeup = self._next_wakeup()
                if wakeup is not None and now.timestamp() < wakeup.timestamp() < target:
                    self.clock.advance(wakeup.timestamp() - now.timestamp())
                else:
                    self.clock.advance(max(0.0, target - now.timestamp()))
                self.settle()
                now = self.clock.now()
                if now.timestamp() >= target - 1e-9:
                    return now  # type: ignore[no-any-return]

    def _background(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.settle(max_rounds=20)
            except Exception as exc:  # keep serving; tests inspect settle_errors
                self.settle_errors.append(exc)

    def after_write(self) -> None:
        """Called by the HTTP layer after every committed write."""
        if self.auto_settle and getattr(self.clock, "is_fake", False) and self.controllers:
            self.settle()

    # -- server ----------------------------------------------------------------------------------------------

    def start(self) -> SimCluster:
        if self._server is not None:
            return self
        import tempfile

        from tau_testing.sim.server import ServerThread

        self._tmpdir = tempfile.TemporaryDirectory(prefix="tau-sim-")
        os.chmod(self._tmpdir.name, 0o700)
        self._server = ServerThread(self)
        self._server.start()
        scheme = "https" if self.tls else "http"
        self.url = f"{scheme}://{self.host}:{self.port}"
        self.kubeconfig_path = self.write_kubeconfig(Path(self._tmpdir.name) / "kubeconfig")
        if not getattr(self.clock, "is_fake", False):
            self._stop.clear()
            self._runner = threading.Thread(target=self._background, name="tau-sim-controllers", daemon=True)
            self._runner.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.process_kubelet is not None:
            self.process_kubelet.shutdown()  # tau_testing.sim.kubelet_process: no process outlives the cluster
        if self._runner is not None:
            self._runner.join(timeout=5)
            self._runner = None
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- kubeconfig ------------------------------------------------------------------------------------------

    context_name = "tau-sim"

    def context_for(self, user: str) -> str:
        return self.context_name if user == "admin" else f"{self.context_name}-{user}"

    def kubeconfig(self, user: str = "admin", namespace: str | None = None) -> dict[str, Any]:
        """A kubeconfig dict with one context per user; ``user`` picks the current context."""
        if not self.url:
            raise RuntimeError("start the cluster before asking for its kubeconfig")
        cluster: dict[str, Any] = {"server": self.url}
        if self.tls and self.ca_data is not None:
            import base64

            cluster["certificate-authority-data"] = base64.b64encode(self.ca_data).decode()
        contexts = []
        for u in self.users:
            ctx: dict[str, Any] = {"cluster": self.context_name, "user": u.name}
            if namespace:
                ctx["namespace"] = namespace
            contexts.append({"name": self.context_for(u.name), "context": ctx})
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.context_name, "cluster": cluster}],
            "users": [{"name": u.name, "user": {"token": u.token}} for u in self.users],
            "contexts": contexts,
            "current-context": self.context_for(user),
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, user: str = "admin", namespace: str | None = None) -> Path:
        """Write the kubeconfig (mode 0600, parent directory 0700 when created)."""
        import yaml

        if user not in self.users:
            raise KeyError(f"no user {user!r}; known: {', '.join(u.name for u in self.users)}")
        path = Path(path)
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700)
        text = yaml.safe_dump(self.kubeconfig(user, namespace), sort_keys=False)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        tmp.replace(path)  # readers never see a half-written kubeconfig
        return path

    # -- conveniences for tests ------------------------------------------------------------------------------

    def wait_for(self, predicate: Any, timeout: float = 5.0, interval: float = 0.02) -> Any:
        """Poll ``predicate()`` (settling a fake cluster between polls) until it returns a truthy value."""
        deadline = time.monotonic() + timeout
        while True:
            if getattr(self.clock, "is_fake", False):
                self.settle()
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError("condition not met in time")
            time.sleep(interval)

    def event(self, involved: dict[str, Any], reason: str, message: str, type_: str = "Normal",
              component: str = "tau-sim") -> dict[str, Any]:
        """Record a core/v1 Event about ``involved`` (repeated events bump ``count``)."""
        from tau_testing.sim.clock import rfc3339

        meta = involved.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        now = rfc3339(self.clock.now())
        name = f"{meta.get('name')}.{reason.lower()}.{abs(hash((meta.get('uid'), reason, message))) % 10**10:x}"
        existing = self.store.get("v1", "Event", ns, name)
        if existing is not None:
            existing["count"] = int(existing.get("count") or 1) + 1
            existing["lastTimestamp"] = now
            return self.store.update(existing)
        return self.store.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"apiVersion": involved.get("apiVersion"), "kind": involved.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": component}, "reportingComponent": component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        })


__all__ = ["ApiError", "SimCluster", "load_crd_documents"]
