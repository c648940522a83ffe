"""Every fenced block in docs/ marked runnable is executed, so the guides cannot go stale.

The marker is a class on the fence (pymdownx.superfences attribute syntax):

* ```` ```{.bash .runnable} ```` runs with bash (``set -euo pipefail``);
* ```` ```{.yaml .runnable data-file="tau/train.yaml"} ```` (any language) writes the block to that file.

A page's runnable blocks form one script, in page order, like a reader typing them into one terminal
(a ``cd`` carries over). It runs in a fresh temporary directory holding a copy of ``examples/``, with the
local backend's state (``TAU_DATA_DIR``), ``HOME`` and ``TAU_CONFIG_DIR`` inside it and no kubeconfig.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```\{(?P<attrs>[^}]*)\}[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
ATTR = re.compile(r'(?P<key>[\w-]+)="(?P<value>[^"]*)"')
EOF_MARK = "TAU_DOCS_SNIPPET_EOF"


#: Fenced blocks that are pictures, not commands or files (rendered by the site).
DIAGRAMS = frozenset({"mermaid"})
ANY_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
_CLUSTER = "needs a cluster with TauGrid installed; on the simulator that is the minute-long platform walkthrough"

#: Every command, config or code block in docs/ that is not marked runnable, keyed by (page, first line),
#: with why it cannot run here.  ``test_the_unexecuted_blocks_are_exactly_the_listed_ones`` keeps it exact.
NOT_RUNNABLE: dict[tuple[str, str], str] = {
    ("community/contributing.md", "python3 -m pip install nox"):
        "installs nox and runs the whole CI suite, which contains this test",
    ("getting-started/platform-walkthrough.md",
     "python3 -m pip install ./tau-core ./tau-plugins/* ./tau-portal ./tau-controller"):
        "installs into the environment; tests/e2e/test_platform_walkthrough.py runs the script and checks each step",
    ("getting-started/quickstart.md", "python3 -m pip install ./tau-core ./tau-plugins/* ./tau-portal"):
        "installs the distributions, which the test environment already has (CI installs them the same way)",
    ("platform/install.md", "tau cluster install --context my-aks                           # the published chart"):
        _CLUSTER + " (tests/e2e/test_install_then_run.py, test_install_with_controller.py run these verbs)",
    ("platform/workspaces.md",
     "tau workspace create aurora --principal-name aurora-researchers          # preview"):
        _CLUSTER + " (tests/e2e/test_platform_walkthrough.py runs create, check, status and quota show)",
    ("plugins.md", "# pyproject.toml of your distribution"):
        "a fragment of a distribution's pyproject.toml; installing one would change the environment of the "
        "rest of the suite (the runnable test on the same page loads the plugin module inline instead)",
    ("plugins.md", "register(name, target, **meta)"): "a call signature, not a program",
    ("python-sdk.md",
     'endpoint = tau.serve("llm", "serve-1x", from_finetune=train, image="REG/IMG@sha256:...", replicas=2,'):
        _CLUSTER + "; from_finetune resolves through a helper pod (tests/e2e/test_sdk_serve.py covers it)",
    ("python-sdk.md", "import lightning as L"):
        "needs Lightning, which imports torch (too heavy for CI); "
        "tau-plugins/tau-python/tests/test_stellar_lightning.py tests the logger without it",
    ("platform/recorder.md", "taugrid-portal experiment stellar train-7f2c --source kusto \\"):
        "reads a real Kusto cluster; tau-plugins/tau-kusto/tests/test_stellar_kusto.py runs the same command against "
        "the loopback Kusto endpoint",
    ("researcher/artifacts.md", "tau run get old-job --path /data/old-job/results --pvc blob-training   # a deleted workload"):
        "reads a cluster's data PVC through a helper pod (tests/e2e/test_archived_logs.py covers the helper pod)",
    ("researcher/retry-resume.md", "tau run resume train-7f2c --config tau/train.yaml"):
        "cluster run names and data-PVC checkpoint paths; the runnable block after it resumes a local run",
    ("researcher/serving.md",
     "tau serve deploy llm --profile serve-1x --image REG/IMG@sha256:<digest> --from-model llama:prod -n aurora"):
        _CLUSTER + "; the client dry-runs above render the same objects offline (tests/e2e/test_serve.py)",
    ("researcher/status.md",
     "tau logs train-7f2c -n aurora --path /data/checkpoints/workflows/train-7f2c --pvc blob-training"):
        "reads a cluster's data PVC through a helper pod (tests/e2e/test_archived_logs.py)",
}


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    language: str
    body: str
    data_file: str | None


def snippets(page: Path) -> list[Snippet]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        attrs = match["attrs"]
        classes = [c[1:] for c in attrs.split() if c.startswith(".")]
        if "runnable" not in classes:
            continue
        values = {m["key"]: m["value"] for m in ATTR.finditer(attrs)}
        language = next((c for c in classes if c != "runnable"), "")
        found.append(Snippet(str(page.relative_to(REPO)), text.count("\n", 0, match.start()) + 1, language,
                             match["body"], values.get("data-file")))
    return found


def pages() -> dict[str, list[Snippet]]:
    result = {}
    for page in sorted(DOCS.rglob("*.md")):
        found = snippets(page)
        if found:
            result[str(page.relative_to(DOCS))] = found
    return result


PAGES = pages()


def script(blocks: list[Snippet]) -> str:
    parts = ["set -euo pipefail"]
    for block in blocks:
        parts.append(f"echo '### {block.page}:{block.line}' >&2")
        if block.data_file:
            target = shlex.quote(block.data_file)
            parts.append(f'mkdir -p "$(dirname {target})"\ncat > {target} <<\'{EOF_MARK}\'\n{block.body}{EOF_MARK}')
        else:
            parts.append(block.body)
    return "\n".join(parts) + "\n"


def test_the_guides_have_runnable_snippets() -> None:
    count = sum(len(b) for b in PAGES.values())
    print(f"runnable snippets: {count} in {len(PAGES)} pages")
    assert count >= 10, PAGES.keys()


def test_every_runnable_block_is_a_command_or_a_file() -> None:
    for blocks in PAGES.values():
        for block in blocks:
            assert block.data_file or block.language == "bash", (
                f"{block.page}:{block.line}: a runnable block is ```{{.bash .runnable}} or names a data-file")
            if block.data_file:
                assert not Path(block.data_file).is_absolute() and ".." not in Path(block.data_file).parts
            else:  # `set -e` ignores a command negated with `!`: such a check could never fail
                assert not re.search(r"^\s*! ", block.body, re.M), (
                    f"{block.page}:{block.line}: use `if cmd; then exit 1; fi` instead of `! cmd`")


@pytest.mark.slow
@pytest.mark.realclock
@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_snippets_run(page: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_") and k != "KUBECONFIG"}
    bindir = str(Path(sys.executable).parent)
    env.update(HOME=str(tmp_path / "home"), TAU_DATA_DIR=str(tmp_path / "state"),
               TAU_CONFIG_DIR=str(tmp_path / "config"), KUBECONFIG=str(tmp_path / "no-kubeconfig"),
               PATH=bindir + os.pathsep + env.get("PATH", ""), NO_COLOR="1")
    (tmp_path / "home").mkdir()
    assert shutil.which("tau", path=env["PATH"]), "the tau CLI is not installed next to this Python"
    result = subprocess.run(["bash", "-c", script(PAGES[page])], cwd=work, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (
        f"docs/{page}: a runnable snippet failed (exit {result.returncode})\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}")


def unexecuted_blocks() -> dict[tuple[str, str], int]:
    """(page, first line) -> line of every fenced block in docs/ that is neither runnable nor a diagram."""
    found = {}
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in ANY_FENCE.finditer(text):
            info = match["info"].strip()
            words = [w.lstrip(".") for w in info.strip("{}").split()]
            if "runnable" in words or (words and words[0] in DIAGRAMS):
                continue
            first = (match["body"].splitlines() or [""])[0]
            found[(str(page.relative_to(DOCS)), first)] = text.count("\n", 0, match.start()) + 1
    return found


def test_the_unexecuted_blocks_are_exactly_the_listed_ones() -> None:
    found = unexecuted_blocks()
    unlisted = [f"docs/{page}:{line}: {first}" for (page, first), line in found.items()
                if (page, first) not in NOT_RUNNABLE]
    stale = [f"{page}: {first}" for page, first in NOT_RUNNABLE if (page, first) not in found]
    assert not unlisted, ("mark these blocks runnable, or list them in NOT_RUNNABLE with the reason:\n  "
                          + "\n  ".join(unlisted))
    assert not stale, "NOT_RUNNABLE lists blocks that are gone or now runnable:\n  " + "\n  ".join(stale)
    assert all(reason.strip() for reason in NOT_RUNNABLE.values())
    runnable = sum(len(b) for b in PAGES.values())
    print(f"runnable blocks: {runnable}; listed as not runnable, with reasons: {len(NOT_RUNNABLE)}")


def test_the_runner_stops_at_the_first_failing_block(tmp_path: Path) -> None:
    blocks = [Snippet("x.md", 1, "yaml", "a: 1\n", "sub/a.yaml"), Snippet("x.md", 5, "bash", "false\n", None),
              Snippet("x.md", 9, "bash", "touch reached\n", None)]
    result = subprocess.run(["bash", "-c", script(blocks)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert (tmp_path / "sub" / "a.yaml").read_text() == "a: 1\n"
    assert not (tmp_path / "reached").exists()
    assert "### x.md:5" in result.stderr
