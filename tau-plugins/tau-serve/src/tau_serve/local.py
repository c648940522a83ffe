"""``tau serve deploy NAME --local``: serving on this machine."""

from __future__ import annotations

from tau_core.errors import UsageError
from tau_serve.options import DeployArgs


def deploy_local(args: DeployArgs) -> None:
    """Local serving is not part of this release; say so instead of half-running it."""
    raise UsageError(f"--local is not supported by tau serve deploy {args.name} in this release",
                     hint="deploy to a cluster (omit --local), or run the server directly on this machine")
