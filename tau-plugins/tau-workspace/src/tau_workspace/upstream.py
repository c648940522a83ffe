"""The upstream templates of ``tau workspace init-repo``: ``external-github`` and ``dpr``.

Both wrap code that lives in a public GitHub repository: the image clones ``--upstream OWNER/REPO`` at
``--ref`` into ``/opt/upstream`` and installs it, and the generated targets run ``--smoke-command`` and
``--train-command`` there through ``src/<package>/upstream.py``.  ``external-github`` needs ``--upstream``
and ``--ref``; ``dpr`` defaults to ``facebookresearch/DPR@main`` with commands that fit DPR.  The python
template takes none of these flags.

Every check raises a one-line :class:`~tau_core.errors.UsageError` naming the flag; nothing is written
before all of them pass.
"""

from __future__ import annotations

import re

import attrs

from tau_core.errors import UsageError
from tau_workspace import names

TEMPLATES = ("python", "external-github", "dpr")
UPSTREAM_FLAGS = ("--upstream", "--ref", "--package-import", "--smoke-command", "--train-command")
DPR_UPSTREAM, DPR_REF, DPR_IMPORT = "facebookresearch/DPR", "main", "dpr"
DPR_TRAIN = ("python train_dense_encoder.py train_datasets=[nq_train] dev_datasets=[nq_dev] "
             "train=biencoder_local output_dir=$OUTPUT_DIR/checkpoints")

_OWNER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
_URL = re.compile(r"^https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$")
_REF_CHARS = re.compile(r"^[A-Za-z0-9._/+-]{1,200}$")
_IMPORT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@attrs.frozen
class Upstream:
    """What the upstream templates need, after defaults and validation."""

    repo: str  # OWNER/REPO on github.com
    ref: str
    package_import: str
    smoke_command: str
    train_command: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}.git"


@attrs.frozen
class UpstreamFlags:
    template: str
    upstream: str | None = None
    ref: str | None = None
    package_import: str | None = None
    smoke_command: str | None = None
    train_command: str | None = None


def check_repo(value: str) -> str:
    """``OWNER/REPO`` (or ``https://github.com/OWNER/REPO[.git]``) normalized to ``OWNER/REPO``."""
    match = _URL.match(value)
    owner, _, repo = (match.group(1), "/", match.group(2)) if match else value.partition("/")
    if (not _OWNER.match(owner) or not _REPO.match(repo) or repo in (".", "..") or repo.startswith((".", "-"))
            or repo.endswith(".git")):
        raise UsageError(f"--upstream {names.shown(value)} is not a GitHub repository",
                         hint="pass OWNER/REPO (or https://github.com/OWNER/REPO), e.g. facebookresearch/DPR")
    return f"{owner}/{repo}"


def check_ref(value: str) -> str:
    """A branch, tag or commit that ``git checkout`` accepts and no shell or option parser misreads."""
    bad = (not _REF_CHARS.match(value) or value.startswith(("-", "/", ".")) or value.endswith(("/", ".", ".lock"))
           or ".." in value or "//" in value or "/." in value or value == "HEAD@" or "@{" in value)
    if bad:
        raise UsageError(f"--ref {names.shown(value)} is not a valid git branch, tag or commit",
                         hint="use a name git accepts (e.g. main, v1.2.0) or a commit SHA")
    return value


def check_import(value: str) -> str:
    if not _IMPORT.match(value) or len(value) > 200:
        raise UsageError(f"--package-import {names.shown(value)} is not a Python import name",
                         hint="the module the upstream code installs, e.g. dpr or my_library.models")
    return value


def check_command(value: str, flag: str) -> str:
    """One non-blank line of shell, bounded; it is stored in YAML and run by ``bash -c`` in the container."""
    if not value.strip():
        raise UsageError(f"{flag} must not be blank", hint="omit the flag to use the template's default")
    if _CONTROL.search(value) or len(value) > 2000:
        escaped = names.shown(value.encode("unicode_escape").decode())
        raise UsageError(f"{flag} {escaped} must be one line of at most 2000 characters",
                         hint="put longer logic in a script inside the upstream repository and call that")
    return value


def resolve(flags: UpstreamFlags) -> Upstream | None:
    """The upstream of ``flags.template`` (None for python); a flag the template does not take is an error."""
    if flags.template not in TEMPLATES:
        raise UsageError(f"--template {names.shown(flags.template)} is not one of {', '.join(TEMPLATES)}")
    given = [flag for flag, value in zip(UPSTREAM_FLAGS, (flags.upstream, flags.ref, flags.package_import,
                                                          flags.smoke_command, flags.train_command), strict=True)
             if value is not None]
    if flags.template == "python":
        if given:
            raise UsageError(f"{given[0]} is only used with --template external-github or dpr",
                             hint="drop it, or choose an upstream template")
        return None
    if flags.template == "external-github":
        for value, flag in ((flags.upstream, "--upstream OWNER/REPO"), (flags.ref, "--ref REF")):
            if value is None:
                raise UsageError(f"--template external-github requires {flag}",
                                 hint="for example --upstream huggingface/transformers --ref v4.44.0")
    repo = check_repo(flags.upstream if flags.upstream is not None else DPR_UPSTREAM)
    ref = check_ref(flags.ref if flags.ref is not None else DPR_REF)
    default_import = DPR_IMPORT if flags.template == "dpr" else re.sub(r"[^a-z0-9_]", "_", repo.split("/")[1].lower())
    if default_import[:1].isdigit():
        default_import = f"_{default_import}"
    package_import = check_import(flags.package_import if flags.package_import is not None else default_import)
    smoke = f"python -c 'import {package_import}; print(\"import {package_import}: ok\")'"
    train = DPR_TRAIN if flags.template == "dpr" else f"python -m {package_import}"
    return Upstream(
        repo=repo, ref=ref, package_import=package_import,
        smoke_command=check_command(flags.smoke_command, "--smoke-command") if flags.smoke_command is not None
        else smoke,
        train_command=check_command(flags.train_command, "--train-command") if flags.train_command is not None
        else train)
