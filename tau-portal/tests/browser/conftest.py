"""Fixtures for the Stellar browser tests: a real store, the Debian chromium, Playwright.

The browser is never downloaded: the tests drive ``/usr/bin/chromium`` (override with
``TAU_CHROMIUM``) and fail — not skip — with an install hint when it is missing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("TAU_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def write_history(path: Path, steps: int, seed: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for s in range(steps):
            loss = 2.0 / (1.0 + s * (seed + 1) / 40.0) + 0.05 * math.sin(s / 5.0 + seed) + 0.06
            acc = 1.0 - 0.9 / (1.0 + s / 30.0) * (1.0 + seed / 10.0) * 0.6
            fh.write(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s, "loss": loss, "accuracy": acc}) + "\n")
    return path


def build_store(root: Path, *, runs: int = 4, steps: int = 400) -> Path:
    """A real experiment store: one experiment, two groups, runs imported from JSONL history."""
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import import_jsonl, init_experiment, load_config, parse_artifact, record_run

    store, _ = ExperimentStore.init(root, project="demo")
    with store:
        init_experiment(store, "sweep", project="demo", group="arm-a")
        work = root.parent / (root.name + "-inputs")
        work.mkdir(exist_ok=True)
        config = work / "tau.yaml"
        config.write_text("name: train\nlr: 0.001\nnote: \"</script><script>alert(2)</script>\"\n", encoding="utf-8")
        ckpt = work / "model.pt"
        ckpt.write_bytes(b"weights")
        for i in range(runs):
            run = f"run-{i}"
            group = "arm-a" if i % 2 == 0 else "arm-b"
            record_run(store, run, experiment="sweep", group=group, owner="alice",
                       command=f"tau run train --set lr=0.00{i + 1} --set note='</script><b>x</b>'",
                       result_uri=f"/data/projects/demo/runs/{run}",
                       configs=[load_config(config)], artifacts=[parse_artifact(str(ckpt), run)])
            history = write_history(work / f"{run}.jsonl", steps, i)
            import_jsonl(store, run=run, history=[str(history)], experiment="sweep", group=group, owner="alice")
    return root


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"headless Chromium is required for the Stellar browser tests but {CHROMIUM} is missing; "
            "install the Debian package: `sudo apt-get update && sudo apt-get install -y chromium` "
            "(or point TAU_CHROMIUM at a chromium binary). Playwright must not download a browser.",
            pytrace=False,
        )
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    # Module scope: Playwright's sync API keeps an event loop running in the main thread while it
    # is open, which must not leak into unrelated tests collected after the browser tests.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class PageProbe:
    """A page plus everything it reported: console messages, page errors, dialogs, requests."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", self._dialog)
        page.on("request", lambda r: self.requests.append(r.url))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def console_errors(self) -> list[str]:
        return [text for kind, text in self.console if kind == "error"] + self.errors

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_function("() => window.stellar && window.stellar.ready === true", timeout=30000)
        return self.page


@pytest.fixture
def probe(browser: Any) -> Iterator[PageProbe]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        yield PageProbe(page)
    finally:
        context.close()


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("stellar-browser") / "store")


@pytest.fixture(scope="session")
def served(demo_store: Path) -> Iterator[str]:
    """A real uvicorn server (in a thread, on a random loopback port) over ``demo_store``."""
    yield from run_server(demo_store)


def run_server(store: Path) -> Iterator[str]:
    import threading
    import time

    import uvicorn

    from taugrid_portal.stellar.server import bind, create_app, url_for

    sock = bind("127.0.0.1", 0)
    config = uvicorn.Config(create_app(store), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the Stellar test server did not start")
        time.sleep(0.02)
    try:
        yield url_for(sock)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
