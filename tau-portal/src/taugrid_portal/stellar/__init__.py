"""Stellar: experiment dashboards over the local experiment store.

* :mod:`.snapshot` builds the snapshot (``tau.exp.cockpit.v0``) for a run group, run or
  experiment: runs with state, lifecycle, summaries, configs, artifacts, the command that produced
  each run and its output directory, plus one downsampled chart per metric across the runs.
* :mod:`.downsample` chooses the points a chart draws (deterministic min/max per step bucket);
  the store keeps the full history and the page says "N of M points shown".
* :mod:`.html` renders the snapshot as one self-contained page (uPlot, bundled from npm at build
  time into ``vendor/``; our script ``templates/stellar.js``), :mod:`.tui` as terminal text.
* :mod:`.server` serves it read-only (starlette + uvicorn) and :mod:`.cli` holds the
  ``taugrid-portal experiment stellar|serve|open`` commands.

Heavy libraries (polars, jinja2, starlette, uvicorn) are imported inside the functions that use
them, so importing this package or its CLI module stays cheap.
"""
