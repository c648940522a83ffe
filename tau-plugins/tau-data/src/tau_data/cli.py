"""``tau data``: the command tree (thin: each verb parses flags and calls the registries)."""

from __future__ import annotations

import click

from .dataset_cli import dataset
from .model_cli import model
from .workers import workers


@click.group("data")
def data() -> None:
    """Dataset and model registries: immutable records, aliases that move by compare-and-swap."""


data.add_command(dataset)
data.add_command(model)
for worker in workers:
    data.add_command(worker)
