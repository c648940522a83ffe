"""``tau workspace init-repo``: one generator for every repository form.

:func:`plan` turns a :class:`ScaffoldRequest` into an ordered list of :class:`ScaffoldFile` (path, text,
mode) without touching the disk; :func:`write` writes them.  Three forms share it:

* ``--local``: a repository that runs on this machine (``access.method: local``);
* provider-neutral: ``--workspace`` + ``--kube-context`` gives a ``kubeconfig`` descriptor;
* AKS: ``--workspace`` + the four Azure flags gives an ``aks`` descriptor (context defaults to the
  AKS cluster name).  Sign-in is not part of scaffolding.

Without enough facts for a descriptor none is written.  The output depends only on the request:
the same flags give byte-identical files with identical modes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import attrs

from tau_core import __version__, pathsafe
from tau_core.errors import ConflictError, UsageError
from tau_workspace import names, templates, upstream

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")
_AZURE_FLAGS = ("--azure-subscription-id", "--azure-tenant-id", "--aks-resource-group", "--aks-cluster")


@attrs.frozen
class ScaffoldFile:
    path: str
    text: str
    mode: int = 0o644


@attrs.frozen
class ScaffoldRequest:
    name: str
    image: str | None = None
    template: str = "python"
    python_version: str = "3.12"
    package: str | None = None
    tau_rev: str = "main"
    workspace: str | None = None
    kube_context: str | None = None
    azure_subscription_id: str | None = None
    azure_tenant_id: str | None = None
    aks_resource_group: str | None = None
    aks_cluster: str | None = None
    acr_name: str | None = None
    upstream: str | None = None
    ref: str | None = None
    package_import: str | None = None
    smoke_command: str | None = None
    train_command: str | None = None
    local: bool = False


def package_name(name: str) -> str:
    package = re.sub(r"[^a-z0-9_]", "_", name.lower())
    return f"tau_{package}" if package[:1].isdigit() else package


def _check_name(name: str) -> None:
    if not _NAME.match(name or "") or len(name) > 63:
        raise UsageError(f"repository name {names.shown(name)} must be a lowercase DNS label (a-z, 0-9, '-')",
                         hint="for example: tau workspace init-repo my-research --image <tag>")


def _local_files(req: ScaffoldRequest) -> list[ScaffoldFile]:
    from tau_core.backends.local import scaffold as local

    return [ScaffoldFile(".gitignore", local.GITIGNORE), ScaffoldFile("README.md", local.README.format(name=req.name)),
            ScaffoldFile("tau/smoke.yaml", local.SMOKE_YAML.format(project=req.name)),
            ScaffoldFile("tau/train.yaml", local.TRAIN_YAML.format(project=req.name)),
            ScaffoldFile("tau/workspace.connection.yaml", local.DESCRIPTOR),
            ScaffoldFile("train.py", local.TRAIN_PY.format(name=req.name))]


def _descriptor(req: ScaffoldRequest) -> ScaffoldFile | None:
    azure = (req.azure_subscription_id, req.azure_tenant_id, req.aks_resource_group, req.aks_cluster)
    given = [flag for flag, value in zip(_AZURE_FLAGS, azure, strict=True) if value]
    if given and len(given) < len(azure):
        missing = ", ".join(flag for flag, value in zip(_AZURE_FLAGS, azure, strict=True) if not value)
        raise UsageError(f"the AKS descriptor needs all four Azure flags; missing {missing}")
    if req.workspace is None:
        if given or req.kube_context:
            raise UsageError("--workspace is required to write tau/workspace.connection.yaml",
                             hint="pass the TauWorkspace name the platform team created")
        return None
    workspace = names.dns_label(req.workspace, "--workspace")
    if given:
        for value, flag in ((req.azure_subscription_id, "--azure-subscription-id"),
                            (req.azure_tenant_id, "--azure-tenant-id")):
            if not names.is_uuid(value or ""):
                raise UsageError(f"{flag} {names.shown(value or '')} must be a UUID")
        for value, flag in ((req.aks_resource_group, "--aks-resource-group"), (req.aks_cluster, "--aks-cluster")):
            if not re.fullmatch(r"[A-Za-z0-9._()-]{1,90}", value or ""):
                raise UsageError(f"{flag} {names.shown(value or '')} is not a valid Azure resource name")
        text = templates.DESCRIPTOR_AKS.format(
            workspace=workspace, context=req.kube_context or req.aks_cluster, tenant=req.azure_tenant_id,
            resource_id=(f"/subscriptions/{req.azure_subscription_id}/resourceGroups/{req.aks_resource_group}"
                         f"/providers/Microsoft.ContainerService/managedClusters/{req.aks_cluster}"),
            tau_version=__version__)
    elif req.kube_context:
        text = templates.DESCRIPTOR_KUBECONFIG.format(workspace=workspace, context=req.kube_context,
                                                      tau_version=__version__)
    else:
        raise UsageError("--workspace needs --kube-context (or the four Azure flags) to write a descriptor")
    if req.kube_context is not None:
        names.plain_text(req.kube_context, "--kube-context")
        if any(c in req.kube_context for c in "\n:#'\"{}[]"):
            raise UsageError(f"--kube-context {names.shown(req.kube_context)} contains YAML-special characters")
    return ScaffoldFile("tau/workspace.connection.yaml", text)


def _check_cluster_flags(req: ScaffoldRequest) -> str:
    """Validate the flags every cluster template shares; returns the Python package name."""
    if not req.image:
        raise UsageError("--image is required", hint="the image the targets run, e.g. ghcr.io/acme/train:1.0 "
                         "(or --local for a repository that runs on this machine)")
    if not _IMAGE.match(req.image) or len(req.image) > 255:
        raise UsageError(f"--image {names.shown(req.image)} is not an image reference")
    if not _PYTHON.match(req.python_version):
        raise UsageError(f"--python-version {names.shown(req.python_version)} must look like 3.12")
    package = req.package or package_name(req.name)
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", package):
        raise UsageError(f"--package {names.shown(package)} is not a Python package name")
    for value, flag in ((req.tau_rev, "--tau-rev"), (req.acr_name or "", "--acr-name")):
        if not re.fullmatch(r"[A-Za-z0-9._/-]{0,100}", value):
            raise UsageError(f"{flag} {names.shown(value)} contains unexpected characters")
    return package


def output_dir(req: ScaffoldRequest, target: str) -> str:
    """Where a target's durable results go: under the workspace's default outputRoot when a workspace is named
    (``tau workspace create`` defaults it to /data/projects/<workspace>/runs), else the Job default."""
    if req.workspace:
        return f"/data/projects/{req.workspace}/runs/{target}"
    return f"/data/checkpoints/workflows/{target}"


def _env(pairs: list[tuple[str, str]]) -> str:
    return "".join(f"    {key}: {json.dumps(value)}\n" for key, value in pairs)


def _targets(req: ScaffoldRequest, v: dict[str, str], up: upstream.Upstream | None) -> list[ScaffoldFile]:
    files = []
    for target, script, gpus, steps, comment in (
            ("smoke", "smoke.py", 0, 2, "Smoke target: `tau run smoke` proves the setup in seconds."),
            ("train", "train.py", 0, 40, "Training target: `tau run train` (CPU)."),
            ("train-gpu", "train.py", 1, 40, "GPU training target: `tau run train-gpu` (one GPU).")):
        output = output_dir(req, target)
        if up is None:
            env = [("STEPS", str(steps)), ("OUTPUT_DIR", output)]
        else:
            script = "upstream.py"
            command = up.smoke_command if target == "smoke" else up.train_command
            env = [("UPSTREAM_COMMAND", command), ("UPSTREAM_DIR", "/opt/upstream"), ("UPSTREAM_REPO", up.repo),
                   ("UPSTREAM_REF", up.ref), ("OUTPUT_DIR", output)]
        files.append(ScaffoldFile(f"tau/{target}.yaml", templates.TARGET.format(
            comment=comment, target=target, script=script, gpus=gpus, env=_env(env), output=output, **v)))
    return files


def _cluster_files(req: ScaffoldRequest) -> list[ScaffoldFile]:
    from tau_core.backends.local.scaffold import TRAIN_PY

    up = upstream.resolve(upstream.UpstreamFlags(
        template=req.template, upstream=req.upstream, ref=req.ref, package_import=req.package_import,
        smoke_command=req.smoke_command, train_command=req.train_command))
    package = _check_cluster_flags(req)
    v = {"name": req.name, "package": package, "image": req.image or "", "python_version": req.python_version,
         "tau_rev": req.tau_rev, "acr": req.acr_name or ""}
    readme, dockerfile = templates.README.format(**v), templates.DOCKERFILE.format(**v)
    local_output = 'os.environ.get("TAU_OUTPUT_DIR", "output")'
    train_py = TRAIN_PY.format(name=req.name)
    if local_output not in train_py:  # the shared trainer changed shape: fail loudly rather than lose results
        raise RuntimeError("the local trainer template no longer reads TAU_OUTPUT_DIR")
    train_py = train_py.replace(local_output, f'os.environ.get("OUTPUT_DIR") or {local_output}')
    if up is not None:
        u = {"upstream": up.repo, "upstream_url": up.url, "upstream_ref": up.ref, "smoke_command": up.smoke_command,
             "train_command": up.train_command, "package": package, "python_version": req.python_version}
        readme += templates.UPSTREAM_README.format(**u)
        dockerfile = templates.UPSTREAM_DOCKERFILE.format(**u)
    exe = 0o755
    files = [
        ScaffoldFile(".env.example", templates.ENV_EXAMPLE.format(**v)),
        ScaffoldFile(".gitignore", templates.GITIGNORE),
        ScaffoldFile(".python-version", f"{req.python_version}\n"),
        ScaffoldFile("AGENTS.md", templates.AGENTS.format(**v)),
        ScaffoldFile("README.md", readme),
        ScaffoldFile("images/train.Dockerfile", dockerfile),
        ScaffoldFile("pyproject.toml", templates.PYPROJECT.format(**v)),
        ScaffoldFile("scripts/configure.sh", templates.CONFIGURE_SH.format(**v), exe),
        ScaffoldFile("scripts/doctor.sh", templates.DOCTOR_SH.format(**v), exe),
        ScaffoldFile("scripts/setup-azure.sh", templates.SETUP_AZURE_SH.format(**v), exe),
        ScaffoldFile("scripts/setup.sh", templates.SETUP_SH.format(**v), exe),
        ScaffoldFile("scripts/smoke.sh", templates.RUN_SH.format(target="smoke"), exe),
        ScaffoldFile("scripts/train.sh", templates.RUN_SH.format(target="train"), exe),
        ScaffoldFile(f"src/{package}/__init__.py", templates.INIT_PY.format(**v)),
        ScaffoldFile(f"src/{package}/smoke.py", templates.SMOKE_PY.format(**v)),
        ScaffoldFile(f"src/{package}/train.py", train_py),
    ]
    if up is not None:
        files.append(ScaffoldFile(f"src/{package}/upstream.py", templates.UPSTREAM_PY.format()))
    return files + _targets(req, v, up)


def plan(req: ScaffoldRequest) -> list[ScaffoldFile]:
    """Every file of the scaffold, sorted by path; raises UsageError for bad flags (nothing written)."""
    _check_name(req.name)
    if req.local:
        if req.workspace or req.kube_context or req.azure_subscription_id or req.image:
            raise UsageError("--local repositories run on this machine; drop --workspace, --kube-context, --image "
                             "and the Azure flags")
        extra = [flag for flag, value in zip(upstream.UPSTREAM_FLAGS, (req.upstream, req.ref, req.package_import,
                                                                      req.smoke_command, req.train_command),
                                             strict=True) if value is not None]
        if req.template != "python" or extra:
            raise UsageError(f"--local uses the python template; drop {extra[0] if extra else '--template'}")
        return _local_files(req)
    files = _cluster_files(req)
    descriptor = _descriptor(req)
    if descriptor is not None:
        files.append(descriptor)
    return sorted(files, key=lambda f: f.path)


def write(root: Path, files: list[ScaffoldFile], *, force: bool) -> list[Path]:
    """Write ``files`` under ``root``; existing files abort (nothing written) unless ``force``."""
    if root.exists() and not root.is_dir():
        raise ConflictError(f"{root} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    for f in files:  # every file lands inside ROOT: a symlink out of it is refused before anything is written
        pathsafe.ensure_within(root, pathsafe.existing_ancestor(root / f.path), what="scaffold path",
                               error=ConflictError, hint="remove the symbolic link, or choose another --output")
    existing = [str(root / f.path) for f in files if (root / f.path).exists() or (root / f.path).is_symlink()]
    if existing and not force:
        raise ConflictError(f"refusing to overwrite existing files: {', '.join(existing)}",
                            hint="pass --force to overwrite generator-managed files (other files are never touched)")
    written = []
    for f in files:
        target = root / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        pathsafe.ensure_within(root, target.parent, what="scaffold path", error=ConflictError)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.unlink(missing_ok=True)
        with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(f.text)
        os.chmod(tmp, f.mode)  # explicit: the result does not depend on the caller's umask
        tmp.replace(target)
        written.append(target)
    return written
