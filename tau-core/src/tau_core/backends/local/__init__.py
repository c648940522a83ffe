"""The local execution backend: a ``tau.yaml`` target run as supervised local processes.

Layout of the modules (all import-light; nothing here imports a plugin package):

* :mod:`paths` - where the local state lives (``TAU_DATA_DIR`` or the XDG data dir).
* :mod:`registry` - the local run registry: one directory per run, atomic JSON records.
* :mod:`env` - the environment a local process gets, mirroring the cluster's injected variables.
* :mod:`oom` - memory limits, RSS sampling and failure classification.
* :mod:`publish` - staged artifact publication (``storage.publish: staged``).
* :mod:`artifacts` - safe resolution of ``tau run get --artifact`` paths.
* :mod:`evidence` - the bridge that imports metric chunks into the experiment store.
* :mod:`supervisor` - the small process (``python -m tau_core.backends.local.supervisor RUN_DIR``) that runs a target.
* :mod:`backend` - :class:`~tau_core.backends.local.backend.LocalBackend`, the ``local`` execution backend.
* :mod:`scaffold` - ``tau workspace init-repo NAME --local``.
"""
