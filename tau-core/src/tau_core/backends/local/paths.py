"""Where local runs keep their state.

``TAU_DATA_DIR`` (the CLI's own data directory override) wins; otherwise the XDG data
directory (``$XDG_DATA_HOME/tau`` or ``~/.local/share/tau``).  Inside it:

* ``runs/<run-id>/`` - the run registry (state, request, logs, scratch);
* ``data/`` - the local stand-in for the cluster's ``/data`` volume (``TAU_DATA_DIR`` inside runs);
* ``hot/`` - the local stand-in for the node-local ``/mnt`` scratch volume;
* ``expstore/`` - the default local experiment store (unless ``TAU_EXP_STORE`` names another).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from tau_core.errors import TauError

ENV_HOME = "TAU_DATA_DIR"
RUN_ID_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def tau_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get(ENV_HOME, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return base / "tau"


def data_dir_error(exc: OSError, env: Mapping[str, str] | None = None) -> TauError:
    """An OS error creating tau's data directory, as a typed error that names the setting to change."""
    where = tau_home(env)
    return TauError(f"the tau data directory {where} is not writable: {exc.strerror or exc}",
                    hint=f"set {ENV_HOME} to a writable directory (for example {ENV_HOME}=$HOME/tau-data)")


def runs_root(env: Mapping[str, str] | None = None) -> Path:
    return tau_home(env) / "runs"


def data_root(env: Mapping[str, str] | None = None) -> Path:
    """The local directory that plays the role of the cluster's ``/data`` mount."""
    return tau_home(env) / "data"


def hot_root(env: Mapping[str, str] | None = None) -> Path:
    """The local directory that plays the role of the node-local ``/mnt`` mount."""
    return tau_home(env) / "hot"


def exp_store_root(env: Mapping[str, str] | None = None) -> Path:
    """The experiment store local runs write to: ``TAU_EXP_STORE`` or ``<tau data dir>/expstore``."""
    env = os.environ if env is None else env
    explicit = env.get("TAU_EXP_STORE", "").strip()
    return Path(explicit).expanduser() if explicit else tau_home(env) / "expstore"


def slug(name: str) -> str:
    """A run-id friendly form of a target name (lowercase, ``-`` separated, ≤ 40 chars)."""
    text = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    return (text[:40].strip("-.")) or "run"


def new_run_id(name: str) -> str:
    """``<name>-<yymmdd>-<hhmmss>-<4 hex>``: sortable, unique, a valid experiment-store run id."""
    import secrets

    stamp = time.strftime("%y%m%d-%H%M%S", time.gmtime())
    return f"{slug(name)}-{stamp}-{secrets.token_hex(2)}"


def map_container_path(path: str, env: Mapping[str, str] | None = None) -> Path:
    """Map a cluster path to this machine: ``/data/...`` -> the local data root, ``/mnt/...`` -> hot root.

    Any other absolute path is used as it is (it already names a local directory).
    """
    p = str(path)
    for prefix, root in (("/data", data_root(env)), ("/mnt", hot_root(env))):
        if p == prefix or p.startswith(prefix + "/"):
            rest = p[len(prefix):].lstrip("/")
            return root / rest if rest else root
    return Path(p)
