"""The one table of environment variables and exit codes (the documentation site renders it).

Two kinds of variables: ``cli`` ones are read by ``tau`` / ``taugrid-portal`` on the machine that
runs them (you may set them); ``workload`` ones are set by tau inside a run (local or on a cluster)
for the training code to read.  ``tests/docs/test_envvars.py`` keeps the table and the code in step:
every variable the product code reads is listed here, and every listed variable occurs in the code.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

Scope = Literal["cli", "workload"]


@attrs.frozen
class EnvVar:
    name: str
    scope: Scope
    summary: str
    default: str = ""


@attrs.frozen
class ExitCode:
    code: int
    meaning: str


def _cli(name: str, summary: str, default: str = "") -> EnvVar:
    return EnvVar(name, "cli", summary, default)


def _run(name: str, summary: str, default: str = "") -> EnvVar:
    return EnvVar(name, "workload", summary, default)


ENV_VARS: Final[tuple[EnvVar, ...]] = (
    # plugins and diagnostics
    _cli("TAU_PLUGINS", "Load only these plugins (comma-separated entry-point or distribution names); "
         "empty loads none.", "every installed plugin"),
    _cli("TAU_DISABLE_PLUGINS", "Never load these plugins (comma-separated)."),
    _cli("TAU_TRACE_HOOKS", "`1` prints every hook call, its implementations and results to stderr."),
    _cli("TAU_DEBUG", "`1` prints the traceback of an unexpected error."),
    # Kubernetes access
    _cli("TAU_CONTEXT", "Kubernetes context to use when `--context` is not given.",
         "the repository connection's context"),
    _cli("TAU_SYSTEM_NAMESPACE", "Namespace of the TauGrid system (TauCluster, TauWorkspace objects).",
         "tau-system"),
    _cli("TAU_REQUEST_TIMEOUT", "Seconds one Kubernetes API request may take.", "30"),
    # Entra sign-in
    _cli("TAU_AUTH_MODE", "Entra sign-in: `azurecli`, `devicecode` or `interactive`.",
         "reuse an `az login`, else device code"),
    _cli("AZURE_AUTHORITY_HOST", "Entra authority host of another cloud."),
    _cli("TAU_AZURE_ARM_ENDPOINT", "Azure Resource Manager endpoint of another cloud."),
    _cli("TAU_AZURE_CA_BUNDLE", "A CA bundle to trust for Entra and ARM requests."),
    # local state
    _cli("TAU_DATA_DIR", "Root of local state: run registry, local `/data`, experiment store. Inside a run it "
         "is the run's data root (`/data` on a cluster).",
         "~/.local/share/tau"),
    _cli("TAU_CONFIG_DIR", "Where repository connections and approvals are kept.",
         "$XDG_CONFIG_HOME/tau or ~/.config/tau"),
    _cli("TAU_EXP_STORE", "Experiment store directory for local runs.", "$TAU_DATA_DIR/expstore"),
    _cli("TAU_EXP_STORE_ROOT", "Root of per-context stores for `taugrid-portal`: the store is "
         "ROOT/$TAU_CONTEXT/$TAU_TEAM/$TAU_PROJECT (all three must be set)."),
    _cli("TAU_PROJECT", "Project segment of a `TAU_EXP_STORE_ROOT` store."),
    _cli("TAU_EXP_LOCK_TIMEOUT", "Seconds a writer waits for the experiment store lock.", "10"),
    _cli("TAU_STELLAR_ALLOWED_HOSTS", "Extra host names a Stellar server answers for (comma-separated, "
         "`*.example.com` allowed), e.g. behind a proxy."),
    _cli("TAU_LOCAL_RAY_ADDRESS", "Jobs API URL of a running Ray head (`http://127.0.0.1:8265`): local "
         "`engine: rayjob` runs submit to it and leave it up instead of starting a head per run; its token "
         "comes from Ray's `RAY_AUTH_TOKEN`/`RAY_AUTH_TOKEN_PATH`."),
    _cli("TAU_LOCAL_SUPERVISOR_FOREGROUND", "`1` keeps the local run supervisor in the foreground "
         "(tests and debugging)."),
    # data registries
    _cli("TAU_DATA_REGISTRY", "Default registry URL for every `tau data` verb (`file://...`, `az://...`)."),
    _cli("TAU_AZURE_BLOB_ENDPOINT", "Blob endpoint for `az://` registries, e.g. a private link; "
         "`{account}` is replaced by the account name.", "https://{account}.blob.core.windows.net"),
    _cli("TAU_DATA_JOB_TIMEOUT", "Seconds `tau data` waits for an in-cluster data job."),
    # rendering
    _cli("TAU_METRICS_OFFLOAD_IMAGE", "Digest-pinned `taugrid-portal` image for the metrics offload sidecar "
         "(required by `metrics.offload.enabled`)."),
    _cli("TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI", "Kusto (ADX) cluster URI the metrics offload sidecar ships to "
         "(platform policy; unset: no Kusto offload). The pod authenticates with its workload identity."),
    _cli("TAU_METRICS_OFFLOAD_ADX_DATABASE", "Kusto database of the metrics offload sidecar.", "Metrics"),
    _cli("TAU_METRICS_OFFLOAD_ADX_CLIENT_ID", "Client id of the workload identity the sidecar signs in with "
         "(set as its `AZURE_CLIENT_ID`; an identifier, not a secret)."),
    _cli("TAU_TEAM", "Default `policy.team` of a run config; team segment of a `TAU_EXP_STORE_ROOT` store."),
    # the Python SDK
    _cli("TAU_BINARY", "The `tau` executable the Python SDK runs instead of calling the CLI in-process."),
    _cli("TAU_RUN_ID", "Run id `tau.stellar` logs under when none is given.", "run-<date>-<time>"),
    _cli("TAU_EXPERIMENT_PROJECT", "Experiment project `tau.stellar` logs to when none is given.", "default"),
    # set inside a run
    _run("TAU_OUTPUT_DIR", "The run's durable output directory (metrics, checkpoints, reports)."),
    _run("TAU_OUTPUT_STAGING_DIR", "Staging directory when `storage.publish: staged`."),
    _run("TAU_RESUME_FROM", "Checkpoint to resume from (`tau run resume`, automatic retry)."),
    _run("TAU_RETRY_ATTEMPT", "Attempt number of an automatic retry."),
    _run("TAU_RETRY_MAX", "`resilience.max_retries` of the run."),
    _run("TAU_RETRY_REASON", "Why the previous attempt failed (Preempted, Evicted, OOMKilled)."),
    _run("TAU_CLUSTER_JOB", "`1` in every container of a cluster workload (Job, RayJob, RayService, Deployment); "
         "the SDK refuses to submit from there."),
    _run("TAU_HOT_DIR", "Node-local scratch root.", "/mnt"),
    _run("TAU_DATASETS_DIR", "Node-local dataset cache.", "$TAU_HOT_DIR/datasets"),
    _run("TAU_CHECKPOINTS_DIR", "Node-local checkpoint scratch.", "$TAU_HOT_DIR/checkpoints"),
    _run("TAU_DURABLE_DATASETS_DIR", "Datasets on the durable data volume.", "$TAU_DATA_DIR/datasets"),
    _run("TAU_DURABLE_CHECKPOINTS_DIR", "Checkpoints on the durable data volume.", "$TAU_DATA_DIR/checkpoints"),
    _run("TAU_UPSTREAM_CHECKPOINT", "Checkpoint handed over from an upstream managed workflow step."),
    _run("TAU_MANAGED_WRAPPER", "Set by the managed workflow wrapper around an SDK function."),
    _run("TAU_PAYLOAD_TARGET_DIR", "Where a Ray job's shipped project payload is unpacked."),
    _run("TAU_PAYLOAD_DIGEST", "Digest of the shipped project payload (verified before use)."),
    _run("TAU_DIST_BACKEND", "Distributed backend; `nccl` makes Ray Train / Tune workers use GPUs."),
    _run("TAU_NUM_WORKERS", "Ray Train / Tune worker count."),
    _run("TAU_WORLD_SIZE", "Total processes of a distributed run."),
    _run("TAU_TUNE_MODE", "Ray Tune direction (`min` or `max`)."),
    _run("TAU_TUNE_METRIC", "Ray Tune metric to optimise."),
    _run("TAU_TUNE_PARAM_SPACE", "Ray Tune search space (JSON)."),
    _run("TAU_TUNE_NUM_SAMPLES", "Ray Tune samples."),
    _run("TAU_TUNE_MAX_CONCURRENT_TRIALS", "Ray Tune concurrent trials."),
    _run("TAU_TUNE_TRAIN_MODULE", "Module holding the Ray Tune trainable."),
    _run("TAU_TUNE_TRAIN_PATH", "Path of the Ray Tune trainable's script."),
    _run("TAU_DS_RECORD", "The dataset record an in-cluster `tau data` worker registers or ingests."),
    _run("TAU_PROFILE", "Name of the workload profile the run was placed with."),
    _run("TAU_POD_NAME", "The pod's name (downward API); names the archived log `logs/<pod>-<container>.log`."),
    _run("TAU_LOG_ARCHIVE_MAX_BYTES", "Size at which an archived container log rotates to `.log.1`.", "67108864"),
    # the metrics offload sidecar (`taugrid-portal experiment offload metrics --watch` reads each for its flag)
    _run("TAU_METRICS_HISTORY", "Where the run writes its metric history chunks (`--history`; path-separated)."),
    _run("TAU_METRICS_OFFLOAD_RUN", "Run id the sidecar ships metrics for (`--run`)."),
    _run("TAU_METRICS_OFFLOAD_PROJECT", "Experiment project (`--project`)."),
    _run("TAU_METRICS_OFFLOAD_EXPERIMENT", "Experiment name (`--experiment`)."),
    _run("TAU_METRICS_OFFLOAD_GROUP", "Run group (`--group`)."),
    _run("TAU_METRICS_OFFLOAD_SOURCE", "Source label of the shipped rows (`--source`)."),
    _run("TAU_METRICS_OFFLOAD_OUT", "The sidecar's output directory: checkpoints, chunk copies (`--out`)."),
    _run("TAU_METRICS_OFFLOAD_COMPLETION_FILE", "The file whose appearance ends `--watch` (`--completion-file`)."),
    _run("TAU_METRICS_OFFLOAD_ARTIFACT_URI", "Artifact URI put on the terminal status marker."),
    _run("TAU_METRICS_OFFLOAD_CHECKPOINT_URI", "Checkpoint URI put on the terminal status marker."),
    _run("TAU_METRICS_OFFLOAD_INTERVAL", "Polling interval of `--watch` (`--interval`, a duration).", "1m"),
    _run("TAU_METRICS_OFFLOAD_REMOTE_WRITE_ENDPOINT", "adx-mon remote-write endpoint (`--remote-write-endpoint`)."),
    _run("TAU_METRICS_OFFLOAD_KUSTO_ENDPOINT", "Kusto query/management endpoint (`--kusto-endpoint`)."),
    _run("TAU_METRICS_OFFLOAD_KUSTO_DATABASE", "Kusto database (`--kusto-database`)."),
    _run("TAU_METRICS_OFFLOAD_KUSTO_INGEST_ENDPOINT", "Kusto ingestion endpoint (`--kusto-ingest-endpoint`)."),
    _run("TAU_METRICS_OFFLOAD_KUSTO_CLUSTER", "Cluster name stamped on shipped events (`--kusto-cluster`)."),
    _run("TAU_METRICS_OFFLOAD_KUSTO_NAMESPACE", "Namespace stamped on shipped events (`--kusto-namespace`)."),
    _run("TAU_METRICS_OFFLOAD_TAGS", "Extra tags on shipped events (JSON object or key=value list)."),
)

#: exit codes of ``tau`` and ``taugrid-portal`` (tau_core.cli turns every outcome into one of these)
EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final[tuple[ExitCode, ...]] = (
    ExitCode(EXIT_OK, "Success (also when the output pipe closes early)."),
    ExitCode(EXIT_FAILURE, "A failure you can act on: one `error:` line and usually a `hint:` line on stderr; "
             "also an unexpected error (`TAU_DEBUG=1` shows its traceback), or a followed run that failed."),
    ExitCode(EXIT_USAGE, "The command line is wrong: unknown option, missing argument, bad combination."),
    ExitCode(EXIT_INTERRUPTED, "Interrupted with Ctrl-C."),
)


def by_scope(scope: Scope) -> tuple[EnvVar, ...]:
    return tuple(v for v in ENV_VARS if v.scope == scope)
