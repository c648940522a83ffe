"""Progress bars for hashing and copying: on stderr, only when stderr is a terminal."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

import click

from tau_core.output import is_tty


@contextlib.contextmanager
def bar(total: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """Yield an ``update(nbytes)`` callable, or ``None`` when stderr is not a terminal."""
    if not is_tty(sys.stderr) or total <= 0:
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr, show_pos=False,
                           show_percent=True, show_eta=True) as progress:
        yield progress.update
