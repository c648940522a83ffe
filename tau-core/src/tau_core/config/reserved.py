"""What Tau reserves in every workload it renders, defined once.

The config rules reject a tau.yaml that reaches into these names, and the renderers (and the
local backend) use the same constants when they build pods, so the two can never drift apart.
"""

from __future__ import annotations

from typing import Final

#: Container paths Tau mounts or writes in every workload pod (data, hot cache, scripts, runtime, source).
RESERVED_PATHS: Final = ("/data", "/mnt", "/script", "/manifest", "/tmp", "/dev/shm", "/var/run/tau", "/tau/source")
#: The subset a managed manifest's extra mounts may not shadow.
RESERVED_MOUNT_PATHS: Final = ("/script", "/manifest", "/data", "/mnt", "/dev/shm")
#: Pod volume names the renderers own (plus every ``tau-asset-*``).
RESERVED_VOLUMES: Final = ("tau-hot", "dshm", "tau-source", "tau-metrics-runtime", "script", "ray-tmp")
#: The only ``TAU_*`` environment keys a researcher may set.
SETTABLE_TAU_ENV: Final = ("TAU_RESUME_FROM", "TAU_RETRY_ATTEMPT", "TAU_RETRY_MAX", "TAU_RETRY_REASON")
#: Non-``TAU_`` environment keys the launchers own.
RESERVED_ENV: Final = ("MASTER_ADDR", "MASTER_PORT")
#: Literal environment limits: 64 KiB per value, 128 KiB in total (``len(name)+1+len(value)+1``).
MAX_LITERAL_ENV_VALUE_BYTES: Final = 64 * 1024
MAX_LITERAL_ENV_TOTAL_BYTES: Final = 128 * 1024
#: KubeRay's limit on a RayJob name (it derives longer child names from it).
RAYJOB_NAME_MAX: Final = 47
#: ``execution.configs`` sections the ray-train launcher accepts.
RAY_TRAIN_SECTIONS: Final = ("torch_config", "scaling_config", "failure_config")
#: torchrun flags the launcher sets itself (``execution.configs`` may not name them).
TORCHRUN_MANAGED_FLAGS: Final = ("standalone", "nnodes", "nproc-per-node", "node-rank", "rdzv-backend",
                                 "rdzv-endpoint", "rdzv-id", "master-addr", "master-port", "module", "no-python",
                                 "run-path")
