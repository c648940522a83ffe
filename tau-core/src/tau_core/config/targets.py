"""Which config file a ``tau run`` invocation means (reference §2.1-2.2).

* ``--config FILE``: that file; the positional argument (if any) is the run name.
* ``TARGET``: ``tau/TARGET.yaml`` or ``tau/TARGET.yml`` (both present is an error), searched from
  the working directory up to the Git worktree root.
* neither: the first of ``tau.yaml``, ``tau.yml``, ``.tau.yaml`` (more than one is an error).
* a monorepo catalog ``tau.projects.yaml`` (schema ``tau.projects.v1``) at the worktree root selects
  the project: ``--project`` -> owner of ``--config`` -> project containing the working directory ->
  the unique project that has TARGET -> the only project.  Every ambiguity lists the choices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tau_core.config.issues import ConfigIssue, ConfigValidationError
from tau_core.config.loader import Document, display_path, load_yaml_file, require_mapping
from tau_core.errors import ConfigError, NotFoundError, UsageError
from tau_core.gitrepo import git_root as git_root  # re-exported for existing importers

CATALOG_FILE = "tau.projects.yaml"
CATALOG_SCHEMA = "tau.projects.v1"
CONNECTION_FILE = "workspace.connection.yaml"
DEFAULT_CONFIGS = ("tau.yaml", "tau.yml", ".tau.yaml")
TARGET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
PROJECT_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
#: YAML anchors, aliases and merge keys are not allowed in the catalog
re_alias = re.compile(r"(^|[\s\[{,:-])[&*][A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Project:
    name: str
    root: Path
    connection: Path | None
    workspace: str | None = None


@dataclass
class Target:
    """The resolved config file and how it was chosen."""

    config_path: Path
    name_override: str | None
    how: str  # "--config", "target <x>", "default file"
    repo_root: Path | None = None
    project: Project | None = None
    target_name: str | None = None

    @property
    def config_dir(self) -> Path:
        return self.config_path.parent

    def connection_path(self) -> Path | None:
        """The workspace connection descriptor that applies to this target, if any."""
        if self.project is not None and self.project.connection is not None:
            return self.project.connection if self.project.connection.is_file() else None
        # One discovery rule for every caller: up to the Git boundary (or the filesystem root
        # outside a repository), never through a symlink that leaves the repository.
        from tau_core.workspace.descriptor import find_descriptor

        return find_descriptor(self.config_dir)


def _search_dirs(cwd: Path, root: Path | None) -> list[Path]:
    cwd = cwd.resolve()
    if root is None:
        return [cwd]
    out = []
    cur = cwd
    while True:
        out.append(cur)
        if cur == root or cur.parent == cur:
            break
        cur = cur.parent
    return out


def _contained(found: Path, boundary: Path) -> Path:
    """``found`` when it resolves inside ``boundary`` (the repository); a symlink out of it is refused
    before the file is read, so no foreign content can reach an error message."""
    from tau_core.pathsafe import ensure_within

    ensure_within(boundary, found, what="run config", error=ConfigError,
                  hint="run configs are read from inside the repository; copy the file in, or pass --config")
    return found


def _target_file(directory: Path, target: str) -> Path | None:
    yaml_, yml = directory / "tau" / f"{target}.yaml", directory / "tau" / f"{target}.yml"
    if yaml_.is_file() and yml.is_file():
        raise ConfigError(f"run target {target!r} has both tau/{target}.yaml and tau/{target}.yml in {directory}",
                          hint="keep exactly one extension")
    if yaml_.is_file():
        return yaml_
    if yml.is_file():
        return yml
    return None


def _default_file(directory: Path) -> Path | None:
    found = [directory / n for n in DEFAULT_CONFIGS if (directory / n).is_file()]
    if len(found) > 1:
        raise ConfigError(f"{directory} has several default run configs: {', '.join(p.name for p in found)}",
                          hint="keep exactly one of tau.yaml, tau.yml, .tau.yaml, or pass --config")
    return found[0] if found else None


def list_targets(directory: Path) -> list[str]:
    tau_dir = directory / "tau"
    if not tau_dir.is_dir():
        return []
    names = {p.stem for p in tau_dir.iterdir()
             if p.suffix in (".yaml", ".yml") and p.name != CONNECTION_FILE and p.is_file()}
    return sorted(names)


# -- monorepo catalog ----------------------------------------------------------------------------

def _repo_relative(doc: Document, value: Any, where: tuple[Any, ...], what: str, root: Path) -> Path:
    shown = ".".join(str(p) for p in where)
    if not isinstance(value, str) or not value:
        raise ConfigValidationError([doc.issue(where, shown, f"{what} must be a non-empty string")])
    parts = value.split("/")
    if value.startswith("/") or "\\" in value or any(p in ("", ".", "..") for p in parts):
        raise ConfigValidationError([doc.issue(where, shown, f"{what} {value!r} must be a repository-relative slash "
                                               "path without empty, '.' or '..' components")])
    return root / value


def load_catalog(root: Path) -> dict[str, Project] | None:
    """Projects of ``tau.projects.yaml`` at the worktree root, or None when there is no catalog."""
    path = root / CATALOG_FILE
    if not path.is_file():
        return None
    doc = load_yaml_file(path)
    data = require_mapping(doc, "project catalog")
    if "<<" in doc.text or re_alias.search(doc.text):
        raise ConfigValidationError([ConfigIssue(doc.display, 1, 1, "", "the project catalog must not use YAML "
                                                 "anchors, aliases or merge keys")])
    issues: list[ConfigIssue] = []
    for key in data:
        if key not in ("schema", "projects"):
            issues.append(doc.issue((key,), key, f"unknown key {key!r}", "a catalog has schema and projects"))
    if data.get("schema") != CATALOG_SCHEMA:
        issues.append(doc.issue(("schema",), "schema", f"catalog schema {data.get('schema')!r} is unsupported; "
                                f"expected {CATALOG_SCHEMA!r}"))
    projects_raw = data.get("projects")
    if not isinstance(projects_raw, dict) or not projects_raw:
        issues.append(doc.issue(("projects",), "projects", "projects must be a non-empty mapping of name -> "
                                "{path, connection}"))
    if issues:
        raise ConfigValidationError(issues)
    assert isinstance(projects_raw, dict)
    projects: dict[str, Project] = {}
    for name, spec in projects_raw.items():
        where = ("projects", name)
        if not PROJECT_NAME.match(name):
            issues.append(doc.issue(where, f"projects.{name}", f"project name {name!r} must be lowercase letters, "
                                    "digits and '-'"))
            continue
        if not isinstance(spec, dict):
            issues.append(doc.issue(where, f"projects.{name}", "expected a mapping with path and connection"))
            continue
        for key, value in spec.items():
            if key not in ("path", "connection", "workspace"):
                issues.append(doc.issue((*where, key), f"projects.{name}.{key}", f"unknown key {key!r}"))
            elif not isinstance(value, str):
                issues.append(doc.issue((*where, key), f"projects.{name}.{key}", "values must be strings"))
        if issues:
            continue
        proj_root = _repo_relative(doc, spec.get("path"), (*where, "path"), "path", root)
        conn = spec.get("connection")
        conn_path = _repo_relative(doc, conn, (*where, "connection"), "connection", root) if conn else None
        projects[name] = Project(name, proj_root, conn_path, spec.get("workspace"))
    if issues:
        raise ConfigValidationError(issues)
    roots = sorted(projects.values(), key=lambda p: len(p.root.parts))
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            if a.root == b.root or a.root in b.root.parents:
                raise ConfigValidationError([doc.issue(("projects", b.name, "path"), f"projects.{b.name}.path",
                                                       f"project roots must be disjoint: {b.name} is inside "
                                                       f"{a.name}")])
    return projects


def _owner(projects: dict[str, Project], path: Path) -> Project | None:
    path = path.resolve()
    for project in projects.values():
        if path == project.root.resolve() or project.root.resolve() in path.parents:
            return project
    return None


def _choices(projects: dict[str, Project]) -> str:
    return ", ".join(sorted(projects))


def select_project(projects: dict[str, Project], *, project: str | None, config: Path | None, cwd: Path,
                   target: str | None) -> Project:
    """Project selection for submission (reference §2.2)."""
    if project is not None:
        chosen = projects.get(project)
        if chosen is None:
            raise UsageError(f"unknown Tau project {project!r}; valid projects: {_choices(projects)}",
                             hint="rerun with --project <name>")
        if config is not None:
            owner = _owner(projects, config)
            if owner is None:
                raise ConfigError(f"--config {config} is not owned by any Tau project; known project paths: "
                                  + ", ".join(f"{p.name}={p.root}" for p in projects.values()))
            if owner.name != chosen.name:
                raise UsageError(f"--project {project!r} does not own --config {config}; the config belongs to "
                                 f"project {owner.name!r}", hint=f"drop --project or use --project {owner.name}")
        return chosen
    if config is not None:
        owner = _owner(projects, config)
        if owner is None:
            raise ConfigError(f"--config {config} is not owned by any Tau project; known project paths: "
                              + ", ".join(f"{p.name}={p.root}" for p in projects.values()),
                              hint="move the config into a project or add the project to tau.projects.yaml")
        return owner
    here = _owner(projects, cwd)
    if here is not None:
        return here
    if target is not None:
        having = [p for p in projects.values() if _target_file(p.root, target) is not None]
        if len(having) == 1:
            return having[0]
        if len(having) > 1:
            raise UsageError(f"run target {target!r} exists in projects: {', '.join(sorted(p.name for p in having))}",
                             hint="rerun with --project <name>")
    if len(projects) == 1:
        return next(iter(projects.values()))
    raise UsageError(f"Tau project is ambiguous; valid projects: {_choices(projects)}",
                     hint="rerun with --project <name>, or run from inside a project directory")


# -- the entry point -----------------------------------------------------------------------------

def resolve_target(target: str | None = None, *, config: str | Path | None = None, project: str | None = None,
                   cwd: Path | None = None) -> Target:
    """Find the config file for ``tau run [TARGET] [--config FILE] [--project P]``."""
    cwd = (cwd or Path.cwd()).resolve()
    root = git_root(cwd)
    projects = load_catalog(root) if root is not None else None
    if project is not None and projects is None:
        raise UsageError("--project requires tau.projects.yaml at the Git worktree root",
                         hint="create the catalog, or drop --project")
    if config is not None:
        path = Path(config)
        path = path if path.is_absolute() else cwd / path
        if not path.exists():
            raise NotFoundError(f"config file {display_path(path, cwd)} does not exist",
                                hint="check the --config path")
        if not path.is_file():
            raise ConfigError(f"--config {display_path(path, cwd)} is not a regular file")
        chosen = None
        if projects is not None:
            chosen = select_project(projects, project=project, config=path, cwd=cwd, target=None)
        return Target(path, target, "--config", root, chosen, None)
    chosen = None
    search = _search_dirs(cwd, root)
    if projects is not None:
        chosen = select_project(projects, project=project, config=None, cwd=cwd, target=target)
        search = [chosen.root] if chosen.root.resolve() not in search else \
            search[: search.index(chosen.root.resolve()) + 1]
    if target is not None:
        if not TARGET_NAME.match(target) or "/" in target or target in (".", ".."):
            raise UsageError(f"run target {target!r} must be a name, not a path",
                             hint="use --config for explicit paths")
        for directory in search:
            found = _target_file(directory, target)
            if found is not None:
                _contained(found, root or directory)
                return Target(found, None, f"target {target}", root, chosen, target)
        available = sorted({t for d in search for t in list_targets(d)})
        hint = ("available targets: " + ", ".join(available)) if available else "or pass --config FILE"
        raise NotFoundError(f"run target {target!r} not found; expected tau/{target}.yaml", hint=hint)
    for directory in search:
        found = _default_file(directory)
        if found is not None:
            _contained(found, root or directory)
            return Target(found, None, "default file", root, chosen, None)
    available = sorted({t for d in search for t in list_targets(d)})
    hint = ("name a target: " + ", ".join(f"tau run {t}" for t in available)) if available else \
        "create tau.yaml, or pass --config FILE"
    raise NotFoundError("no Tau run config found (looked for tau.yaml, tau.yml, .tau.yaml)", hint=hint)
