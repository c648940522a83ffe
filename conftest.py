"""Suite-wide collection rules (the distributions' own conftest files add their fixtures).

Isolation under pytest-xdist (``nox -s tests`` runs ``-n auto --dist loadgroup``): every fixture gives each
test its own temporary directories, config dirs and loopback ports (port 0), so tests run on any worker.
What cannot be split goes to one worker through an ``xdist_group``:

* ``browser`` tests share the Debian Chromium (memory) and the repository's ``test-artifacts/`` directory.
"""

from __future__ import annotations

import pytest

GROUPS = {"browser": "browser"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        for marker, group in GROUPS.items():
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.xdist_group(group))
                break
