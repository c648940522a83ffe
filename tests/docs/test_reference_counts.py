"""Measure: the site's pages generated from code against those written by hand (printed; run with -s).

Generated: the pages docs/_hooks/reference.py adds at build time, and the stub pages whose content is one
mkdocs-click or mkdocstrings directive. Every reference page except the section index must be generated."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
DIRECTIVE = re.compile(r"^::: (mkdocs-click|tau_core\.)", re.M)


def _hook_pages() -> set[str]:
    spec = importlib.util.spec_from_file_location("tau_docs_reference_hook", DOCS / "_hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.PAGES)


def test_reference_pages_are_generated_from_code() -> None:
    sources = {str(p.relative_to(DOCS)): p.read_text() for p in DOCS.rglob("*.md") if "_hooks" not in p.parts}
    stubs = {page for page, text in sources.items() if DIRECTIVE.search(text)}
    generated = _hook_pages() | stubs
    by_hand = set(sources) - stubs
    reference = {p for p in generated | by_hand if p.startswith("reference/")}
    print(f"\npages generated from code: {len(generated)} ({len(reference - {'reference/index.md'})} in the "
          f"reference section); pages written by hand: {len(by_hand)}")
    assert reference - generated == {"reference/index.md"}
    assert {"plugins/hooks.md", "reference/cli/tau.md", "reference/cli/taugrid-portal.md"} <= stubs
    assert len(_hook_pages()) >= 4
