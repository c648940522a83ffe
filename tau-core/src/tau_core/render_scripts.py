"""Shell wrappers and sidecars shared by the workload renderers.

A workload's main command is composed as one ``bash`` script so that the wrappers nest in a
fixed order (outermost last): storage preflight -> profiler -> staged publication ->
checkpoint artifact index -> metrics offload.  Everything here is deterministic text.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_core.rendering import (
    RenderRequest,
    canonical_json,
    derived_id,
    experiment_identity,
    hardened_container_security,
    is_placeholder,
    require_pinned,
    resolved_output,
)

METRICS_RUNTIME_DIR = "/var/run/tau"
METRICS_READY_FILE = "/var/run/tau/metrics-ready"
METRICS_DONE_FILE = "/var/run/tau/metrics-done"
METRICS_COMPLETION_FILE = "/var/run/tau/metrics-completion.json"
METRICS_WAIT_SECONDS = 120
METRICS_CONTAINER = "metrics-offload"
METRICS_VOLUME = "tau-metrics-runtime"
STAGING_ROOT = "/mnt/tau-output"
PUBLICATION_DIR = keys.ARTIFACTS_DIR
PUBLICATION_MARKER = keys.ARTIFACTS_COMPLETE_MARKER
LOG_ARCHIVE_MAX_BYTES = keys.LOG_ARCHIVE_MAX_BYTES_DEFAULT


def q(text: str) -> str:
    return shlex.quote(text)


def dq(text: str) -> str:
    """``text`` as a double-quoted bash word (keeps the script free of single quotes, so it nests
    cleanly inside ``bash -c '...'``)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return f'"{escaped}"'


@dataclass
class Wrappers:
    """What to wrap around the core command, and the values the wrappers need."""

    preflight: bool = False
    output: str | None = None
    staging_dir: str | None = None
    publication_id: str | None = None
    checkpoint: str | None = None
    metrics: bool = False
    profiler_prefix: list[str] = field(default_factory=list)
    #: Written with ``{"exit_code": N}`` whenever the script exits (Ray driver log offload).
    completion_file: str | None = None
    #: Archive the script's stdout/stderr as ``<output>/logs/<pod>-<log_container>.log`` (needs ``output``).
    log_container: str | None = None


def compose(prelude: Sequence[str], core: str, wrappers: Wrappers) -> str:
    """One bash script: prelude lines, then ``core`` run inside the wrappers."""
    lines: list[str] = ["set -euo pipefail"]
    archive = bool(wrappers.log_container and wrappers.output)
    if archive:
        lines += log_archive_defs(str(wrappers.output), str(wrappers.log_container))
    if wrappers.completion_file or archive:
        done = dq(wrappers.completion_file or "")
        body = ["tau_ec=$?"]
        if wrappers.completion_file:
            body.append(f'printf "{{\\"exit_code\\":%s}}\\n" "$tau_ec" > {done} || true')
        if archive:
            body.append("tau_logs_close")
        lines += [f'tau_done() {{ {"; ".join(body)}; exit "$tau_ec"; }}', "trap tau_done EXIT"]
    if wrappers.preflight:
        lines += [
            "if [ ! -d /data ] || [ ! -w /data ]; then",
            '  echo "tau: durable storage /data is not mounted writable in this pod" >&2; exit 1',
            "fi",
        ]
    if archive:
        lines += log_archive_setup()
    if wrappers.metrics:
        lines += [
            _wait_file(METRICS_READY_FILE),
            f'  echo "tau: metrics offload sidecar did not become ready within {METRICS_WAIT_SECONDS}s" >&2; exit 124',
            "fi",
        ]
    lines += list(prelude)
    if wrappers.staging_dir:
        lines.append(f"mkdir -p {dq(wrappers.staging_dir)}")
    core_line = core
    if wrappers.profiler_prefix:
        core_line = " ".join(q(a) for a in wrappers.profiler_prefix) + " " + core
    # The workload runs as a child so that TERM/INT (preemption, cancel) reach it while the
    # wrappers still get to record the outcome.
    lines += [
        'tau_rc=0; tau_child=""; tau_term=0',
        'tau_forward() { tau_term=1; if [ -n "$tau_child" ]; then kill -TERM "$tau_child" 2>/dev/null || true; fi; }',
        "trap tau_forward TERM INT",
        f"{core_line} &",
        "tau_child=$!",
        'if [ "$tau_term" -eq 1 ]; then kill -TERM "$tau_child" 2>/dev/null || true; fi',
        'while :; do wait "$tau_child" && tau_rc=0 || tau_rc=$?; kill -0 "$tau_child" 2>/dev/null || break; done',
        "trap - TERM INT",
    ]
    if wrappers.output and wrappers.staging_dir and wrappers.publication_id:
        lines += ['if [ "$tau_rc" -eq 0 ]; then', *("  " + ln for ln in _publish_lines(wrappers)), "fi"]
    if wrappers.checkpoint and wrappers.output:
        lines += ['if [ "$tau_rc" -eq 0 ]; then', *("  " + ln for ln in _index_lines(wrappers)), "fi"]
    if wrappers.metrics:
        lines += [
            'if [ "$tau_rc" -eq 0 ]; then tau_state=succeeded; else tau_state=failed; fi',
            'printf "{\\"state\\":\\"%s\\",\\"reason\\":\\"exit-code\\",\\"message\\":\\"exit code %s\\",'
            '\\"completed_at\\":\\"%s\\"}\\n" '
            f'"$tau_state" "$tau_rc" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > {METRICS_COMPLETION_FILE}.tmp',
            f"mv -f {METRICS_COMPLETION_FILE}.tmp {METRICS_COMPLETION_FILE}",
            _wait_file(METRICS_DONE_FILE),
            f'  echo "tau: metrics offload sidecar did not finish within {METRICS_WAIT_SECONDS}s" >&2; exit 125',
            "fi",
        ]
    lines.append('exit "$tau_rc"')
    return "\n".join(lines) + "\n"


def log_archive_defs(output: str, container: str) -> list[str]:
    """Copy everything the script writes (stdout and stderr, each still going to its own stream) into
    ``<output>/logs/<pod>-<container>.log`` through two ``tee -a`` processes fed by FIFOs.

    Size cap: a background check every second copies a log grown past ``$TAU_LOG_ARCHIVE_MAX_BYTES``
    (default 64 MiB) to ``.log.1`` and truncates it (copytruncate: at most 2x the cap plus one second of output
    on disk; lines written between the copy and the truncation are lost). ``tee`` writes as it reads, so
    nothing waits in a buffer; ``tau_logs_close`` (the EXIT trap, also after SIGTERM) restores the streams
    and waits up to 10s for both copies to drain. Without a writable log directory or a FIFO the run goes on
    unarchived, with a warning.
    """
    pod = f"${{{keys.ENV_POD_NAME}:-${{HOSTNAME:-pod}}}}"
    return [
        f"tau_logdir={dq(output + '/' + keys.LOGS_DIR)}; tau_log=\"$tau_logdir/{pod}-{container}.log\"",
        f'tau_logmax="${{{keys.ENV_LOG_ARCHIVE_MAX_BYTES}:-{LOG_ARCHIVE_MAX_BYTES}}}"; '
        'tau_teeo=""; tau_teee=""; tau_rot=""',
        "tau_logs_close() {",
        '  [ -n "$tau_teeo" ] || return 0',
        '  exec 1>&5 2>&6 5>&- 6>&-',
        '  [ -z "$tau_rot" ] || kill "$tau_rot" 2>/dev/null || true',
        '  tau_w=0; while { kill -0 "$tau_teeo" || kill -0 "$tau_teee"; } 2>/dev/null && [ "$tau_w" -lt 100 ]; '
        'do sleep 0.1; tau_w=$((tau_w+1)); done',
        '  rm -rf "$tau_fifo"; tau_teeo=""',
        "}",
    ]


def log_archive_setup() -> list[str]:
    """Start the copies (after the storage preflight; see :func:`log_archive_defs`)."""
    return [
        'if mkdir -p "$tau_logdir" 2>/dev/null && tau_fifo=$(mktemp -d 2>/dev/null || mktemp -d -p /dev/shm) '
        '&& mkfifo "$tau_fifo/o" "$tau_fifo/e"; then',
        # $BASHPID, not $$: Kubernetes turns $$ into $ in a container's command
        '  tau_self=$BASHPID; (while kill -0 "$tau_self" 2>/dev/null && sleep 1; do '
        'tau_sz=$(wc -c < "$tau_log" 2>/dev/null || echo 0); '
        'if [ "$tau_sz" -gt "$tau_logmax" ]; then cp -f "$tau_log" "$tau_log.1" && : > "$tau_log"; fi; done) '
        "</dev/null >/dev/null 2>&1 &",
        "  tau_rot=$!",
        '  tee -a "$tau_log" < "$tau_fifo/o" & tau_teeo=$!',
        '  tee -a "$tau_log" < "$tau_fifo/e" >&2 & tau_teee=$!',
        '  exec 5>&1 6>&2 1>"$tau_fifo/o" 2>"$tau_fifo/e"',
        "else",
        '  echo "tau: cannot archive logs under $tau_logdir; continuing without" >&2',
        "fi",
    ]


def log_archive_env() -> dict[str, Any]:
    """The pod's own name for the archived log file (``logs/<pod>-<container>.log``)."""
    return {"name": keys.ENV_POD_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}


def _wait_file(path: str) -> str:
    return (
        f'tau_i=0; while [ ! -e {dq(path)} ] && [ "$tau_i" -lt {METRICS_WAIT_SECONDS * 2} ]; '
        f"do sleep 0.5; tau_i=$((tau_i+1)); done\nif [ ! -e {dq(path)} ]; then"
    )


def _publish_lines(w: Wrappers) -> list[str]:
    dest = f"{w.output}/{PUBLICATION_DIR}/{w.publication_id}"
    return [
        f"tau_stage={dq(w.staging_dir or '')}; tau_dest={dq(dest)}",
        'mkdir -p "$tau_dest"',
        'for tau_f in "$tau_stage"/* "$tau_stage"/.[!.]* "$tau_stage"/..?*; do',
        '  [ -e "$tau_f" ] || [ -L "$tau_f" ] || continue',
        '  tau_n=$(basename "$tau_f")',
        f'  case "$tau_n" in {PUBLICATION_MARKER}|{PUBLICATION_DIR}) '
        'echo "tau: staged output uses the reserved name $tau_n" >&2; exit 126;; esac',
        '  if [ -L "$tau_f" ] || [ ! -f "$tau_f" ]; then',
        '    echo "tau: staged entry $tau_n is not a regular file; publish directories with an application-owned '
        'durable protocol" >&2; exit 126',
        "  fi",
        '  tau_sum=$(sha256sum -- "$tau_f" | cut -d" " -f1)',
        '  if [ -e "$tau_dest/$tau_n" ]; then',
        '    [ "$(sha256sum -- "$tau_dest/$tau_n" | cut -d" " -f1)" = "$tau_sum" ] && continue',
        '    echo "tau: refusing to overwrite non-matching durable artifact $tau_n" >&2; exit 126',
        "  fi",
        '  tau_tmp="$tau_dest/.tau-publish-$tau_n.$$"',
        '  cp -a -- "$tau_f" "$tau_tmp"',
        '  [ "$(sha256sum -- "$tau_tmp" | cut -d" " -f1)" = "$tau_sum" ] '
        '|| { echo "tau: digest mismatch while publishing $tau_n" >&2; exit 126; }',
        '  mv -n -- "$tau_tmp" "$tau_dest/$tau_n"',
        '  [ "$(sha256sum -- "$tau_dest/$tau_n" | cut -d" " -f1)" = "$tau_sum" ] '
        '|| { echo "tau: concurrent writer changed $tau_n" >&2; exit 126; }',
        "done",
        f'printf "complete %s\\n" {dq(w.publication_id or "")} > "$tau_dest/{PUBLICATION_MARKER}.tmp"',
        f'mv -f "$tau_dest/{PUBLICATION_MARKER}.tmp" "$tau_dest/{PUBLICATION_MARKER}"',
    ]


def _index_lines(w: Wrappers) -> list[str]:
    out = w.output or ""
    target = f"{out}/{w.checkpoint}"
    index = f"{out}/.tau/checkpoint-artifact.json"
    doc = canonical_json({"checkpoint": w.checkpoint, "path": target})
    return [
        f"if [ ! -e {dq(target)} ]; then echo {dq('tau: storage.checkpoint ' + str(w.checkpoint) + ' was not written under ' + out)} >&2; exit 1; fi",  # noqa: E501
        f"mkdir -p {dq(out + '/.tau')}",
        f'printf "%s\\n" {dq(doc)} > {dq(index + ".tmp")} && mv -f {dq(index + ".tmp")} {dq(index)}',
    ]


# -- staged publication and checkpoint -------------------------------------------------------


def staged_publication(request: RenderRequest, output: str | None) -> tuple[str, str] | None:
    """(staging dir, publication id) when ``storage.publish: staged``; validates the paths."""
    if request.config.storage.publish != "staged":
        return None
    if not output or not (output == "/data" or output.startswith("/data/")):
        raise ConfigError(
            "staged artifact publication requires storage.output under /data",
            hint="set storage.output to a directory under /data on a writable PVC",
        )
    publication = request.context.artifact_publication_id or derived_id(
        "publication", request.name, request.submission_id
    )
    return f"{STAGING_ROOT}/{request.name}", str(publication)


def checkpoint_artifact(request: RenderRequest, output: str | None) -> str | None:
    ckpt = request.config.storage.checkpoint
    if not ckpt:
        return None
    text = str(ckpt)
    parts = text.split("/")
    if text != text.strip() or text.startswith("/") or "\\" in text or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(
            f"storage.checkpoint: must be a relative path inside the run's checkpoint dir, without '.' or '..' segments (got {text!r})",  # noqa: E501
            hint="name a file or directory relative to storage.output, for example best/model.safetensors",
        )
    if not output:
        raise ConfigError(
            "storage.checkpoint requires a writable durable PVC output",
            hint="set storage.data_pvc (and optionally storage.output)",
        )
    return text


# -- metrics offload sidecar --------------------------------------------------------------------


@dataclass
class MetricsOffload:
    container: dict[str, Any]
    session_id: str
    annotations: dict[str, str]


def metrics_offload(request: RenderRequest, *, pvc_mounted: bool) -> MetricsOffload | None:
    """The ``metrics-offload`` sidecar when ``metrics.offload.enabled`` (decision 7: image from env)."""
    if not request.config.metrics.offload.enabled:
        return None
    output, image = _offload_preconditions(request, pvc_mounted)
    session = str(request.context.metrics_session_id or derived_id("metrics", request.name, request.submission_id))
    kusto = offload_kusto(request)
    container: dict[str, Any] = {
        "name": METRICS_CONTAINER,
        "image": image,
        "command": ["taugrid-portal"],
        "args": _offload_args(request, output, session) + (kusto.args if kusto else []),
        "env": [
            {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "TAU_EXP_STORE", "value": f"{METRICS_RUNTIME_DIR}/metrics/{session}/expstore"},
            *(kusto.env if kusto else []),
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
        "securityContext": hardened_container_security(),
        "volumeMounts": [
            {"name": METRICS_VOLUME, "mountPath": METRICS_RUNTIME_DIR},
            {"name": "data", "mountPath": "/data"},
        ],
    }
    annotations = {keys.EXPERIMENT_SOURCE: "stellar", keys.METRICS_SESSION_ID: session}
    return MetricsOffload(container, session, annotations)


def _offload_preconditions(request: RenderRequest, pvc_mounted: bool) -> tuple[str, str]:
    """(output, pinned image): history paths, experiment identity, durable output and the image are required."""
    cfg = request.config
    if not cfg.metrics.history:
        raise ConfigError(
            "metrics.offload.enabled requires at least one metrics.history path",
            hint="list the JSONL history globs your trainer writes, relative to storage.output",
        )
    project, experiment, _ = experiment_identity(cfg)
    if not project or not experiment:
        raise ConfigError(
            "metrics.offload.enabled requires experiment.project and experiment.name",
            hint="set experiment.project and experiment.name (or experiment.group)",
        )
    output = resolved_output(request)
    if not output or not pvc_mounted or not output.startswith("/data"):
        raise ConfigError(
            "metrics.offload.enabled requires storage.output on a writable PVC under /data",
            hint="set storage.data_pvc and storage.output",
        )
    image = request.env.get("TAU_METRICS_OFFLOAD_IMAGE", "")
    if not image:
        raise ConfigError(
            "metrics.offload.enabled requires TAU_METRICS_OFFLOAD_IMAGE",
            hint="export TAU_METRICS_OFFLOAD_IMAGE=<taugrid-portal image>@sha256:<digest>",
        )
    require_pinned(image, "TAU_METRICS_OFFLOAD_IMAGE")
    return output, image


def _offload_args(request: RenderRequest, output: str, session: str) -> list[str]:
    """``taugrid-portal experiment offload metrics --watch ...`` for this run."""
    cfg, env = request.config, request.env
    project, experiment, group = experiment_identity(cfg)
    args = ["experiment", "offload", "metrics", "--watch", "--run", request.name, "--project", project,
            "--experiment", experiment]
    if group:
        args += ["--group", group]
    args += [
        "--source", env.get("TAU_METRICS_OFFLOAD_SOURCE") or "stellar-online",
        "--out", env.get("TAU_METRICS_OFFLOAD_OUT") or f"{output}/.tau/metrics/{session}/offload",
        "--completion-file", METRICS_COMPLETION_FILE,
        "--interval", env.get("TAU_METRICS_OFFLOAD_INTERVAL") or "10s",
        "--baseline-existing-history",
        "--ready-file", METRICS_READY_FILE,
        "--done-file", METRICS_DONE_FILE,
    ]
    for h in (str(h) for h in cfg.metrics.history or []):
        args += ["--history", h if h.startswith("/") else str(PurePosixPath(output) / h)]
    workspace = request.context.workspace or cfg.policy.workspace
    if workspace:
        args += ["--tag", f"workspace={workspace}"]
    endpoint = env.get("TAU_METRICS_OFFLOAD_REMOTE_WRITE_ENDPOINT")
    if endpoint:
        args += ["--remote-write-endpoint", endpoint]
    return [*args, "--status-artifact-uri", f"file://{output}"]


@dataclass
class OffloadKusto:
    """The sidecar's Kusto settings: where to ship (args) and which workload identity to use (env); never a
    credential: the pod authenticates with its workload identity."""

    args: list[str]
    env: list[dict[str, Any]]


def offload_kusto(request: RenderRequest) -> OffloadKusto | None:
    """Kusto offload when the platform's policy sets ``TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI`` (with
    ``..._ADX_DATABASE``, default ``Metrics``, and ``..._ADX_CLIENT_ID``, the workload identity's client id)."""
    from urllib.parse import urlsplit

    env = request.env
    uri = (env.get("TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI") or "").strip()
    if not uri:
        return None
    parts = urlsplit(uri)
    loopback = parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")
    if (parts.scheme != "https" and not loopback) or not parts.hostname or parts.username or parts.password \
            or parts.query or parts.fragment or parts.path.strip("/"):
        raise ConfigError(f"TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI {uri!r} must be an https:// Kusto cluster URI "
                          "without path, query or credentials",
                          hint="for example https://mycluster.westeurope.kusto.windows.net")
    database = (env.get("TAU_METRICS_OFFLOAD_ADX_DATABASE") or "").strip() or "Metrics"
    if not database.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise ConfigError(f"TAU_METRICS_OFFLOAD_ADX_DATABASE {database!r} is not a Kusto database name",
                          hint="letters, digits, '_', '-' and '.'")
    args = ["--kusto-endpoint", uri.rstrip("/"), "--kusto-database", database]
    namespace = request.context.namespace
    if namespace and not is_placeholder(namespace):
        args += ["--kusto-namespace", namespace]
    client_id = (env.get("TAU_METRICS_OFFLOAD_ADX_CLIENT_ID") or "").strip()
    return OffloadKusto(args, [{"name": "AZURE_CLIENT_ID", "value": client_id}] if client_id else [])


def metrics_runtime_volume() -> dict[str, Any]:
    return {"name": METRICS_VOLUME, "emptyDir": {}}


def metrics_runtime_mount() -> dict[str, Any]:
    return {"name": METRICS_VOLUME, "mountPath": METRICS_RUNTIME_DIR}


# -- profiler ---------------------------------------------------------------------------------------


def parse_duration_seconds(value: str, field_name: str) -> int:
    import re

    total = 0.0
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    matches = re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", value)
    if not matches or "".join(a + b for a, b in matches) != value:
        raise ConfigError(
            f'invalid duration "{value}" for {field_name}', hint="use Go duration syntax such as 30s or 2m"
        )
    for amount, unit in matches:
        total += float(amount) * units[unit]
    return int(total)


def profiler_setup(
    request: RenderRequest, output: str | None
) -> tuple[list[dict[str, str]], list[str], dict[str, str]]:
    """(env, command prefix, annotations) for ``profiler.mode`` nsys/ncu."""
    cfg = request.config
    mode = cfg.profiler.mode
    if not mode:
        return [], [], {}
    if mode not in ("nsys", "ncu"):
        raise ConfigError(f'profiler "{mode}": must be nsys|ncu', hint="set profiler.mode to nsys or ncu")
    if not output:
        raise ConfigError(
            "profiler requires durable PVC output; configure storage.data_pvc, storage.volumes/mounts, "
            "or profile spec.resources.persistence",
            hint="set storage.data_pvc",
        )
    rank = str(cfg.profiler.rank or "0")
    ext = "nsys-rep" if mode == "nsys" else "ncu-rep"
    out_dir = f"{output}/profile"
    env = [
        {"name": "TAU_PROFILE_MODE", "value": mode},
        {"name": "TAU_PROFILE_TOOL", "value": mode},
        {"name": "TAU_PROFILE_RANK", "value": rank},
        {"name": "TAU_PROFILE_OUT_DIR", "value": out_dir},
        {"name": "TAU_PROFILE_RUN_ID", "value": request.name},
        {"name": "TAU_PROFILE_NAMESPACE",
         "value": str(request.context.namespace or cfg.policy.namespace or "")},
        {"name": "TAU_PROFILE_EXT", "value": ext},
    ]
    annotations = {keys.PROFILE_MODE: mode, keys.PROFILE_PATH: out_dir, keys.PROFILE_RANK: rank}
    prefix: list[str]
    if mode == "nsys":
        warmup = parse_duration_seconds(str(cfg.profiler.warmup or "0s"), "profiler.warmup")
        duration = parse_duration_seconds(str(cfg.profiler.duration or "2m"), "profiler.duration")
        env += [
            {"name": "TAU_PROFILE_WARMUP_SEC", "value": str(warmup)},
            {"name": "TAU_PROFILE_ACTIVE_SEC", "value": str(duration)},
        ]
        annotations[keys.PROFILE_WARMUP] = f"{warmup}s"
        annotations[keys.PROFILE_DURATION] = f"{duration}s"
        target = f"{out_dir}/rank-{rank}" if rank != "all" else f"{out_dir}/rank-%q{{RANK}}"
        prefix = [
            "nsys",
            "profile",
            "--force-overwrite=true",
            f"--delay={warmup}",
            f"--duration={duration}",
            f"--output={target}",
        ]
    else:
        for fld in ("warmup", "duration"):
            if getattr(cfg.profiler, fld):
                raise ConfigError(
                    f"profiler.{fld} currently applies only to profiler.mode=nsys",
                    hint=f"remove profiler.{fld} or use profiler.mode: nsys",
                )
        target = f"{out_dir}/rank-{rank}" if rank != "all" else f"{out_dir}/rank-%p"
        prefix = ["ncu", "--force-overwrite", f"--export={target}"]
    if rank == "all":
        env.append({"name": "TAU_PROFILE_OUT_PATTERN", "value": f"{out_dir}/rank-{{rank}}.{ext}"})
    else:
        env.append({"name": "TAU_PROFILE_OUT", "value": f"{out_dir}/rank-{rank}.{ext}"})
    pvc = cfg.storage.data_pvc or cfg.storage.result_pvc
    if pvc:
        annotations[keys.PROFILE_PVC] = str(pvc)
    return env, prefix, annotations


def env_list(mapping: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"name": k, "value": str(v)} for k, v in mapping.items()]


@dataclass
class Publication:
    """What staged publication, the checkpoint artifact and metrics offload add to a workload."""

    env: list[dict[str, str]] = field(default_factory=list)
    annotations: dict[str, str | None] = field(default_factory=dict)
    staged: tuple[str, str] | None = None
    checkpoint: str | None = None
    metrics: MetricsOffload | None = None


def publication(request: RenderRequest, wrappers: Wrappers, *, output: str | None, durable: bool,
                multi_pod: bool = False) -> Publication:
    """Configure ``wrappers`` for staged publication, the checkpoint artifact and metrics offload.

    Shared by every renderer; ``multi_pod`` refuses what only a single Job pod can do.
    """
    root = output if durable else None
    pub = Publication()
    pub.staged = staged_publication(request, root)
    if pub.staged:
        if multi_pod:
            raise ConfigError("storage.publish: staged requires a single Job pod",
                              hint="remove execution.nodes or storage.publish")
        wrappers.staging_dir, wrappers.publication_id = pub.staged
        pub.env.append({"name": "TAU_OUTPUT_STAGING_DIR", "value": pub.staged[0]})
        pub.annotations[keys.ARTIFACT_PUBLICATION] = "staged"
        pub.annotations[keys.ARTIFACT_PUBLICATION_ID] = pub.staged[1]
    ckpt = checkpoint_artifact(request, root)
    if ckpt and output:
        pub.checkpoint = wrappers.checkpoint = ckpt
        pub.annotations[keys.CHECKPOINT_ARTIFACT] = f"{output}/{ckpt}"
    pub.metrics = metrics_offload(request, pvc_mounted=durable)
    if pub.metrics:
        if multi_pod:
            raise ConfigError("metrics.offload.enabled requires a single Job pod",
                              hint="remove execution.nodes or metrics.offload")
        wrappers.metrics = True
        pub.annotations.update(pub.metrics.annotations)
    return pub
