"""Building a ``kubernetes_asyncio`` ApiClient from one isolated kubeconfig context.

Kept apart from :mod:`tau_core.kube` so that the (slow) library import happens only here, inside
:func:`load_client`, when a command actually talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tau_core.errors import ClusterError


async def load_client(config: Mapping[str, Any], context: str) -> Any:
    """An ``ApiClient`` for ``context`` of the (already isolated) kubeconfig dict ``config``."""
    from kubernetes_asyncio.client import ApiClient, Configuration
    from kubernetes_asyncio.config.config_exception import ConfigException
    from kubernetes_asyncio.config.kube_config import KubeConfigLoader

    configuration = type.__call__(Configuration)
    try:
        loader = KubeConfigLoader(config_dict=dict(config), active_context=context)
        await loader.load_and_set(configuration)
    except ConfigException as exc:
        raise ClusterError(f"kubeconfig context \"{context}\" is unusable: {exc}",
                           hint="repair the kubeconfig entry for this context, or pass --context") from exc
    return ApiClient(configuration)
