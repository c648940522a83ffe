"""``pvc``: the workspace's ``blob-training`` volume, through short-lived helper pods.

Not available in this build: the helper-pod path of ``tau run get`` reads only, and the write
side (create-if-absent and compare-and-swap by atomic rename on the volume) is not implemented yet.
"""

from __future__ import annotations

from typing import Any

from tau_core.errors import UsageError


class PvcStore:
    def __init__(self, url: str = "pvc", **_options: Any) -> None:
        raise UsageError("the pvc registry backend is not available in this build",
                         hint="use --registry file://<dir> or az://<account>/<container> (or set TAU_DATA_REGISTRY)")
