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


def test_the_runner_stops_at_the_first_failing_block(tmp_path: Path) -> None:
    blocks = [Snippet("x.md", 1, "yaml", "a: 1\n", "sub/a.yaml"), Snippet("x.md", 5, "bash", "false\n", None),
              Snippet("x.md", 9, "bash", "touch reached\n", None)]
    result = subprocess.run(["bash", "-c", script(blocks)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert (tmp_path / "sub" / "a.yaml").read_text() == "a: 1\n"
    assert not (tmp_path / "reached").exists()
    assert "### x.md:5" in result.stderr
