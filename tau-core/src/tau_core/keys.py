"""Every well-known label, annotation and finalizer key, defined once.

Nothing else in the code base spells a ``tau.azure.com/...`` key inline: renderers, status,
lifecycle verbs, the controller and tests import the constants from here.  The values are
compatibility facts (clusters and tools made for TauGrid read them), so they never change.
"""

from __future__ import annotations

from typing import Final

DOMAIN: Final = "tau.azure.com"
API_GROUP: Final = "tau.azure.com"
API_VERSION: Final = "tau.azure.com/v1alpha1"

# -- workload labels ----------------------------------------------------------------------
MANAGED_BY: Final = "tau.azure.com/managed-by"
MANAGED_BY_VALUE: Final = "tau"
RUN: Final = "tau.azure.com/run"
RUN_ID: Final = "tau.azure.com/run-id"
JOB: Final = "tau.azure.com/job"
WORKLOAD_KIND: Final = "tau.azure.com/workload-kind"
WORKSPACE: Final = "tau.azure.com/workspace"
PROFILE: Final = "tau.azure.com/profile"
GPU_CLASS: Final = "tau.azure.com/gpu-class"
GPU_SERIES: Final = "tau.azure.com/gpu-series"
STELLAR_PROJECT: Final = "tau.azure.com/stellar-project"
STELLAR_EXPERIMENT: Final = "tau.azure.com/stellar-experiment"
STELLAR_GROUP: Final = "tau.azure.com/stellar-group"
SERVICE: Final = "tau.azure.com/service"
LOCAL_QUEUE: Final = "tau.azure.com/local-queue"

# -- workload annotations -----------------------------------------------------------------
CAPTURE_VERSION: Final = "tau.azure.com/capture-version"
CAPTURE_VERSION_VALUE: Final = "v1alpha1"
NAMESPACE: Final = "tau.azure.com/namespace"
WORKSPACE_ID: Final = "tau.azure.com/workspace-id"
RESULT_SCOPE: Final = "tau.azure.com/result-scope"
TAU_COMMAND: Final = "tau.azure.com/tau-command"
IMAGE: Final = "tau.azure.com/image"
IMAGE_DIGEST: Final = "tau.azure.com/image-digest"
CODE_SHA: Final = "tau.azure.com/code-sha"
CONFIG_HASH: Final = "tau.azure.com/config-hash"
GPU_COUNT: Final = "tau.azure.com/gpu-count"
DRA_CLAIM_TEMPLATE: Final = "tau.azure.com/dra-claim-template"
STORAGE_MOUNTS: Final = "tau.azure.com/storage-mounts"
STELLAR_PROJECT_VALUE: Final = "tau.azure.com/stellar-project-value"
STELLAR_EXPERIMENT_ID: Final = "tau.azure.com/stellar-experiment-id"
STELLAR_GROUP_VALUE: Final = "tau.azure.com/stellar-group-value"
STELLAR_TAGS: Final = "tau.azure.com/stellar-tags"
STELLAR_PREFIX: Final = "tau.azure.com/stellar-"
SUBMISSION_ID: Final = "tau.azure.com/submission-id"
RESULT_PATH: Final = "tau.azure.com/result-path"
RESULT_PVC: Final = "tau.azure.com/result-pvc"
ARTIFACT_PUBLICATION: Final = "tau.azure.com/artifact-publication"
ARTIFACT_PUBLICATION_ID: Final = "tau.azure.com/artifact-publication-id"
ARTIFACT_BUNDLE_ID: Final = "tau.azure.com/artifact-bundle-id"
ARTIFACT_STORE: Final = "tau.azure.com/artifact-store"
CHECKPOINT_ARTIFACT: Final = "tau.azure.com/checkpoint-artifact"
EXPERIMENT_SOURCE: Final = "tau.azure.com/experiment-source"
METRICS_SESSION_ID: Final = "tau.azure.com/metrics-session-id"
PROFILE_MODE: Final = "tau.azure.com/profile-mode"
PROFILE_PATH: Final = "tau.azure.com/profile-path"
PROFILE_PVC: Final = "tau.azure.com/profile-pvc"
PROFILE_RANK: Final = "tau.azure.com/profile-rank"
PROFILE_WARMUP: Final = "tau.azure.com/profile-warmup"
PROFILE_DURATION: Final = "tau.azure.com/profile-duration"
WORKLOADSPEC_EXECUTION: Final = "tau.azure.com/workloadspec-execution"
SCRIPT_PAYLOAD_DIGEST: Final = "tau.azure.com/script-payload-digest"
PAYLOAD_DIGEST: Final = "tau.azure.com/payload-digest"
LAUNCH: Final = "tau.azure.com/launch"
CLUSTER_NAME: Final = "tau.azure.com/cluster-name"
#: the TauGrid controller version stamped on a workload (the lifecycle recorder's only source for it)
CONTROLLER_VERSION: Final = "tau.azure.com/controller-version"

# -- workload-profile stamps (doc 43) -------------------------------------------------------
TAU_CLUSTER_GENERATION: Final = "tau.azure.com/tau-cluster-generation"
WORKLOAD_PROFILE_SET_HASH: Final = "tau.azure.com/workload-profile-set-hash"
WORKLOAD_PROFILE: Final = "tau.azure.com/workload-profile"
WORKLOAD_PROFILE_SOURCE: Final = "tau.azure.com/workload-profile-source"

# -- control plane ---------------------------------------------------------------------------
V0_PRIMARY_WORKSPACE: Final = "tau.azure.com/v0-primary-workspace"
QUOTA_APPROVED: Final = "tau.azure.com/approved"
QUOTA_REJECTED: Final = "tau.azure.com/rejected"
QUOTA_REVIEWED_BY: Final = "tau.azure.com/reviewed-by"
WORKSPACE_CLEANUP_FINALIZER: Final = "tau.azure.com/workspace-cleanup"
DISCOVER_GPU_FLAVORS: Final = "tau.azure.com/discover-gpu-flavors"

# -- controller-derived node topology labels ------------------------------------------------
SITE: Final = "tau.azure.com/site"
REGION: Final = "tau.azure.com/region"
NETWORK_DOMAIN: Final = "tau.azure.com/network-domain"
ACCELERATOR_DOMAIN: Final = "tau.azure.com/accelerator-domain"
INFINIBAND: Final = "tau.azure.com/infiniband"

# -- Kueue ------------------------------------------------------------------------------------
KUEUE_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"
KUEUE_PODSET_REQUIRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PODSET_PREFERRED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_DEFAULT_LOCAL_QUEUE: Final = "kueue.x-k8s.io/default-local-queue"
KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"
KUEUE_MANAGED: Final = "kueue.x-k8s.io/managed"
KUEUE_POD_SUSPENDING_PARENT: Final = "kueue.x-k8s.io/pod-suspending-parent"
KUEUE_TOPOLOGY_KEYS: Final = (
    KUEUE_PODSET_REQUIRED_TOPOLOGY,
    KUEUE_PODSET_PREFERRED_TOPOLOGY,
    KUEUE_PODSET_UNCONSTRAINED_TOPOLOGY,
)

# -- Kubernetes, KubeRay, Azure and monitoring ------------------------------------------------
HOSTNAME: Final = "kubernetes.io/hostname"
JOB_NAME: Final = "batch.kubernetes.io/job-name"
AKS_NODE_MODE: Final = "kubernetes.azure.com/mode"
RAY_CLUSTER: Final = "ray.io/cluster"
RAY_NODE_TYPE: Final = "ray.io/node-type"
WORKLOAD_IDENTITY_USE: Final = "azure.workload.identity/use"
WORKLOAD_IDENTITY_CLIENT_ID: Final = "azure.workload.identity/client-id"
APP_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
NVIDIA_GPU: Final = "nvidia.com/gpu"
ADX_SCRAPE: Final = "adx-mon/scrape"
ADX_PORT: Final = "adx-mon/port"
ADX_LOG_DESTINATION: Final = "adx-mon/log-destination"

# -- run lifecycle (automatic retry; added with the kubernetes execution backend) --------------
#: On a retried workload: which attempt this object is (1-based retry number), the retry budget,
#: and the failure that caused it.  Recorded on the workload so the count never resets.
RETRY_ATTEMPT: Final = "tau.azure.com/retry-attempt"
RETRY_MAX: Final = "tau.azure.com/retry-max"
RETRY_REASON: Final = "tau.azure.com/retry-reason"

# -- the Tau controller (control-plane.md §1.4, §2.2-§2.3) --------------------------------------
#: ``app.kubernetes.io/managed-by`` value on every object the controller creates.
CONTROLLER_MANAGED_BY_VALUE: Final = "tau-core-controller"
#: Node label the built-in VM-size catalog sets next to ``tau.azure.com/gpu-class``.
KUEUE_GPU_SERIES: Final = "kueue.azure.com/gpu-series"
INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
PSA_ENFORCE: Final = "pod-security.kubernetes.io/enforce"
PSA_AUDIT: Final = "pod-security.kubernetes.io/audit"
PSA_WARN: Final = "pod-security.kubernetes.io/warn"
#: Leader-election Lease name (coordination.k8s.io) of the controller.
CONTROLLER_LEASE: Final = "tau-core-controller.tau.azure.com"
#: Who resubmits a failed run with ``resilience.max_retries > 0``: ``controller`` or ``cli`` (exactly one owner).
RETRY_OWNER: Final = "tau.azure.com/retry-owner"
#: The run's retry policy (JSON: maxRetries, retryOn, backoffInitialSeconds, backoffMaxSeconds, checkpointPath).
RETRY_POLICY: Final = "tau.azure.com/retry-policy"
#: On a failed workload whose retry the controller owns: when (RFC 3339, UTC) its next attempt is due.  Stamped
#: once, when the controller first sees the failure, so the backoff survives a controller restart.
RETRY_DUE: Final = "tau.azure.com/retry-due"
#: On the controller's retry Event ``<run>-retry-<n>``: the next attempt's full object (JSON), recorded before the
#: failed workload is deleted so a controller that stops between the delete and the create can finish it.
RETRY_NEXT: Final = "tau.azure.com/retry-next"
#: On that retry Event: where the recorded attempt stands: ``pending`` (recorded, not yet created), ``submitted``
#: or ``cancelled`` (the failed workload was deleted or replaced by someone else: never resubmitted).
RETRY_STATE: Final = "tau.azure.com/retry-state"

# -- managed workflows and the Python SDK (issue 17) -------------------------------------------
#: Digest of the (redacted) managed manifest a RayJob was rendered from, and its workflow kind.
MANAGED_MANIFEST_DIGEST: Final = "tau.azure.com/managed-manifest-digest"
MANAGED_WORKFLOW_KIND: Final = "tau.azure.com/managed-workflow-kind"
#: Set to "1" in every container Tau renders for a cluster workload (Job, RayJob, RayService, Deployment;
#: :func:`tau_core.rendering.mark_cluster_workload`).  The SDK refuses ``.submit()`` when it sees it.
#: ``TAU_DATA_DIR`` cannot serve: local runs set it too.
ENV_CLUSTER_JOB: Final = "TAU_CLUSTER_JOB"
#: The pod's name, from the downward API, for the archived log ``logs/<pod>-<container>.log``.
ENV_POD_NAME: Final = "TAU_POD_NAME"
#: Size past which the entrypoint wrapper rotates an archived log (bytes; one rotated copy is kept).
ENV_LOG_ARCHIVE_MAX_BYTES: Final = "TAU_LOG_ARCHIVE_MAX_BYTES"
LOG_ARCHIVE_MAX_BYTES_DEFAULT: Final = 64 * 1024 * 1024
#: The directory, under a run's output directory, that holds its archived container logs.
LOGS_DIR: Final = "logs"
#: Where ``tau.stellar`` writes closed metric-history chunks inside a cluster job, relative to
#: ``storage.output`` (the managed RayJob lists it in ``metrics.history`` for the offload sidecar).
STELLAR_HISTORY_GLOB: Final = "stellar/history-*.jsonl"

# -- well-known names and paths (defined once; renderers, backends and workspace code import them) --------
#: The namespace the platform's own objects (TauCluster, controller, portal) live in unless configured.
SYSTEM_NAMESPACE_DEFAULT: Final = "tau-system"
#: Environment variable that overrides :data:`SYSTEM_NAMESPACE_DEFAULT`.
ENV_SYSTEM_NAMESPACE: Final = "TAU_SYSTEM_NAMESPACE"
#: Directory under ``storage.output`` holding one sub-directory per artifact publication.
ARTIFACTS_DIR: Final = ".tau-artifacts"
#: Marker written last (``complete <publication-id>``) once a publication is whole.
ARTIFACTS_COMPLETE_MARKER: Final = ".tau-artifacts-complete"
