"""The Kubernetes client's import-time savings (tau_core.lazy_imports) keep every library whole.

Each check runs in a fresh interpreter, because what it observes is what a process imports.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tau_core.kube import write_private_kubeconfig

pytestmark = pytest.mark.realclock  # a real HTTPS simulator in a child process


def _run(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_read_leaves_urllib3_dateutil_yaml_and_the_system_ca_bundle_unloaded(sim_cluster_factory,
                                                                                       tmp_path):
    cluster = sim_cluster_factory(controllers=False, tls=True)
    kubeconfig = write_private_kubeconfig(cluster.kubeconfig(), tmp_path / "kube" / "config")  # JSON, as tau writes
    out = _run("""
        import sys
        from tau_core.kube import KubeSession, run

        async def read():
            async with await KubeSession.connect(kubeconfig=sys.argv[1]) as session:
                return (await session.get("/api/v1/namespaces/default"))["metadata"]["name"], session.requests

        print(run(read))
        import aiohttp.connector as c
        print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"], c._SSL_CONTEXT_UNVERIFIED.cert_store_stats()["x509_ca"])
        executed = [m for m in ("urllib3", "dateutil.parser", "multiprocessing.pool", "yaml")
                    if type(sys.modules[m]).__name__ != "_Deferred"]
        print(executed)
    """, str(kubeconfig))
    assert out.splitlines() == ["('default', 1)", "0 0", "[]"]


def test_deferred_modules_work_for_any_later_user():
    out = _run("""
        from tau_core.lazy_imports import register_lazy
        register_lazy("urllib3")
        register_lazy("pickle")
        register_lazy("dateutil.parser", forward=("parse",))
        import pickle, urllib3
        from dateutil.parser import parse
        import urllib3.util
        print(pickle.loads(pickle.dumps([1, 2])), urllib3.util.make_headers(basic_auth="a:b")["authorization"])
        print(parse("2026-12-03T00:00:00Z").year, type(__import__("sys").modules["pickle"]).__name__)
        register_lazy("multiprocessing.pool", forward=("ThreadPool",))
        import multiprocessing.pool  # the attribute path works before and after the real module runs
        with multiprocessing.pool.ThreadPool(1) as pool:
            print(pool.apply(len, ("abc",)), multiprocessing.pool is __import__("sys").modules["multiprocessing.pool"])
    """)
    assert out.splitlines() == ["[1, 2] Basic YTpi", "2026 module", "3 True"]


def test_aiohttp_loads_the_system_ca_bundle_when_it_uses_its_default_context(sim_cluster_factory):
    cluster = sim_cluster_factory(controllers=False, tls=True)
    out = _run("""
        import asyncio, ssl, sys
        from tau_core.lazy_imports import import_aiohttp_connector
        import_aiohttp_connector()
        import aiohttp, aiohttp.connector as c
        print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"])

        async def fetch():
            async with aiohttp.ClientSession() as session:  # aiohttp's default, verified context
                try:
                    await session.get(sys.argv[1] + "/version")
                except aiohttp.ClientConnectorCertificateError:
                    return "untrusted"  # the simulator's CA is not in the system bundle
            return "trusted"

        print(asyncio.run(fetch()))
        print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"] > 0,
              c._SSL_CONTEXT_UNVERIFIED.cert_store_stats()["x509_ca"] > 0)
    """, cluster.url)
    assert out.splitlines() == ["0", "untrusted", "True True"]


def test_a_plain_http_client_never_reads_the_trust_store_and_a_context_in_use_is_completed(sim_cluster_factory,
                                                                                          tmp_path):
    plain = sim_cluster_factory(controllers=False)
    tls = sim_cluster_factory(controllers=False, tls=True)
    assert plain.url.startswith("http://")
    kubeconfig = write_private_kubeconfig(plain.kubeconfig(), tmp_path / "kube" / "config")
    out = _run("""
        import asyncio, ssl, sys
        import aiohttp
        from tau_core.kube import KubeSession, run
        from tau_core.lazy_imports import without_trust_store

        async def read():
            async with await KubeSession.connect(kubeconfig=sys.argv[1]) as session:
                name = (await session.get("/api/v1/namespaces/default"))["metadata"]["name"]
                context = session._api.rest_client.pool_manager.connector._ssl
                return name, context.cert_store_stats()["x509_ca"]

        print(run(read))

        async def fetch():  # a deferred context that a TLS connection picks is completed before the handshake
            context = without_trust_store(ssl.create_default_context)
            before = context.cert_store_stats()["x509_ca"]
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
                try:
                    await session.get(sys.argv[2] + "/version")
                except aiohttp.ClientConnectorCertificateError:
                    pass  # the simulator's CA is not in the system bundle
            return before, context.cert_store_stats()["x509_ca"] > 0

        print(asyncio.run(fetch()))
    """, str(kubeconfig), tls.url)
    assert out.splitlines() == ["('default', 0)", "(0, True)"]
