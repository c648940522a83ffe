"""Click commands for Stellar: ``stellar`` (alias ``dashboard``), ``serve`` and ``open``.

The ``experiment`` group adds these commands. Import-light on purpose: polars, jinja2,
starlette and uvicorn load only inside the command that runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tau_core.errors import UsageError

STORE_HELP = "Experiment store directory (default: $TAU_EXP_STORE, or $TAU_EXP_STORE_ROOT/<context>/<team>/<project>)."


def _store_path(explicit: str | None) -> Path:
    """``--store``, else ``$TAU_EXP_STORE``, else ``$TAU_EXP_STORE_ROOT/<context>/<team>/<project>``."""
    from taugrid_portal.store import resolve_store

    return resolve_store(explicit)


def _open(path: Path) -> Any:
    from taugrid_portal.cliutil import open_store

    return open_store(str(path))


def _write_out(text: str, out: str | None) -> None:
    if out is None:
        click.echo(text)
        return
    import os
    import tempfile

    target = Path(out)
    if target.is_dir():
        raise UsageError(f"--out {out} is a directory", hint="pass a file name such as stellar.html")
    if not target.parent.exists():
        raise UsageError(f"--out {out}: directory {target.parent} does not exist")
    # Write beside the target and rename, so a reader never sees a half-written page.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    click.echo(f"wrote {target} ({target.stat().st_size} bytes)", err=True)


@click.command(
    "stellar",
    epilog="""\b
Examples:
  taugrid-portal experiment stellar ray-plus-stellar --out stellar.html
  taugrid-portal experiment stellar run-042 -o tui
  taugrid-portal experiment stellar sweep -o json --max-points 500 | jq '.charts[0].rendered_points'
  taugrid-portal experiment stellar train-7f2c --source kusto --kusto-endpoint https://adx... -o json
""",
)
@click.argument("target")
@click.option("-o", "--output", type=click.Choice(["html", "json", "tui"]), default="html", show_default=True,
              help="html: a self-contained page (no network needed); json: the snapshot the page is built "
              "from; tui: a terminal summary.")
@click.option("--out", "out", metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@click.option("--metric", help="Primary metric (charted first). Default: the first known outcome metric.")
@click.option("--max-points", type=int, metavar="N",
              help="Display points per series (1..12000). Default: 1200, less when the page has many series.")
@click.option("--store", "store", metavar="DIR", help=STORE_HELP)
@click.option("--source", type=click.Choice(["local", "kusto", "auto"]), default="local", show_default=True,
              help="Where to read: the local store, the durable history in Kusto, or auto (local when the "
              "target is there, else Kusto).")
@click.option("--kusto-endpoint", default=None, help="ADX endpoint of the durable history (--source kusto|auto).")
@click.option("--kusto-database", default="Metrics", show_default=True, help="ADX database.")
def stellar(target: str, output: str, out: str | None, metric: str | None,
            max_points: int | None, store: str | None, source: str, kusto_endpoint: str | None,
            kusto_database: str) -> None:
    """Build a Stellar dashboard for an experiment, run group or run.

    TARGET is resolved as a run group, then a run, then an experiment. Charts show every
    metric across the target's runs with hover values, zoom, log scale, smoothing and a run
    filter; the run table shows state, summaries, config, artifacts, the command and the output
    directory. Points are downsampled deterministically for display ("N of M points shown");
    the store keeps the full history. With --source kusto the runs and metrics come from the durable
    history in Kusto (runs whose Kubernetes objects and local store are gone).
    """
    from .kusto import KustoOrigin, choose, kusto_snapshot, local_has
    from .snapshot import build_snapshot, to_json

    if output == "html":
        from .html import vendor_assets

        vendor_assets()  # fail before any work when the chart bundle is missing

    def local() -> dict[str, Any]:
        with _open(_store_path(store)) as s:
            return {**build_snapshot(s, target, metric=metric, max_points=max_points), "source": "local"}

    def in_local() -> bool:
        with _open(_store_path(store)) as s:
            return local_has(s, target)

    origin = KustoOrigin(kusto_endpoint, kusto_database) if kusto_endpoint else None
    snap = choose(source, origin, local, in_local,
                  lambda o: kusto_snapshot(o, target, metric=metric, max_points=max_points),
                  lambda line: click.echo(line, err=True))
    if output == "json":
        text = to_json(snap)
    elif output == "tui":
        from .tui import render_tui

        text = render_tui(snap)
    else:
        from .html import render_html

        text = render_html(snap)
    _write_out(text, out)


@click.command(
    "serve",
    epilog="""\b
Examples:
  taugrid-portal experiment serve --port 8080
  taugrid-portal experiment serve --default-target sweep
  curl -s 'http://127.0.0.1:8080/api/stellar/snapshot?target=sweep' | jq .summary
""",
)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. The server is read-only but has no authentication: keep it on loopback.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port (0 picks a free one).")
@click.option("--default-target", metavar="NAME", help="Redirect / to this target's page.")
@click.option("--open", "open_browser", is_flag=True,
              help="Open the default browser at the default target's page (or /stellar).")
@click.option("--metric", help="Primary metric of the page --open shows.")
@click.option("--store", "store", metavar="DIR", help=STORE_HELP)
def serve(host: str, port: int, default_target: str | None, open_browser: bool, metric: str | None,
          store: str | None, source: str = "local", kusto: Any = None) -> None:
    """Serve Stellar read-only over HTTP (/stellar, /api/stellar/snapshot, /api/stellar/series, /healthz)."""
    from .server import bind, url_for, warn_if_exposed
    from .server import serve as run_server

    path = _store_path(store)
    if kusto is None or source == "local":
        _open(path).close()  # a missing or damaged store fails here, with its hint
    warn_if_exposed(host)
    sock = bind(host, port)
    where = kusto.label if kusto is not None and source == "kusto" else f"store={path}"
    click.echo(f"serving taugrid-portal experiment stellar at {url_for(sock)} ({where})", err=True)
    if open_browser:
        _open_later(url_for(sock, _page(default_target, metric)))
    try:
        run_server(sock, path, default_target=default_target, source=source, kusto=kusto)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        sock.close()


@click.command(
    "open",
    epilog="""\b
Examples:
  taugrid-portal experiment open ray-plus-stellar
  taugrid-portal experiment open sweep --port 8080 --no-browser
""",
)
@click.argument("target")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="Port (0 picks a free one).")
@click.option("--metric", help="Primary metric for the page.")
@click.option("--browser/--no-browser", default=True, show_default=True, help="Open the default browser.")
@click.option("--store", "store", metavar="DIR", help=STORE_HELP)
def open_(target: str, host: str, port: int, metric: str | None, browser: bool,
          store: str | None, source: str = "local", kusto: Any = None) -> None:
    """Serve Stellar and open TARGET's page in the default browser (prints the URL)."""
    from .kusto import choose, local_has, read_target
    from .server import bind, url_for, warn_if_exposed
    from .server import serve as run_server

    path = _store_path(store)

    def local() -> None:
        with _open(path) as s:
            s.resolve_target(target)  # unknown targets fail now, with suggestions

    def in_local() -> bool:
        with _open(path) as s:
            return local_has(s, target)

    choose(source, kusto, local, in_local, lambda o: (read_target(o, target), None)[1],
           lambda line: click.echo(line, err=True))
    warn_if_exposed(host)
    sock = bind(host, port)
    url = url_for(sock, _page(target, metric))
    click.echo(url)
    click.echo(f"opened taugrid-portal experiment stellar at {url} (Ctrl-C stops the server)", err=True)
    if browser:
        _open_later(url)
    try:
        run_server(sock, path, source=source, kusto=kusto)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        sock.close()


def _page(target: str | None, metric: str | None) -> str:
    """The Stellar page path for ``target`` (and its primary ``metric``); bare /stellar without a target."""
    from urllib.parse import urlencode

    query = {**({"target": target} if target else {}), **({"metric": metric} if metric else {})}
    return "/stellar" + ("?" + urlencode(query) if query else "")


def _open_later(url: str) -> None:
    """Open ``url`` in the default browser once the server is listening ($BROWSER is honoured)."""
    import threading
    import webbrowser

    threading.Timer(0.3, lambda: webbrowser.open(url)).start()


# The ``experiment`` group looks these up by name (``stellar``, ``serve``, ``open_command``).
stellar_command, serve_command, open_command = stellar, serve, open_
COMMANDS = (stellar, serve, open_)
