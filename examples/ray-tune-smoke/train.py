"""Deterministic Tune target: the generated driver calls train_loop_per_worker(config) on each trial.

The loss curve depends only on lr, batch_size and the step, so the best trial is reproducible.
"""

import ray.train


def train_loop_per_worker(config):
    lr = float(config["lr"])
    batch_size = int(config["batch_size"])
    loss = 10.0
    for step in range(5):
        loss = loss * (1.0 - min(0.9, lr * 5.0)) + 32.0 / batch_size * 0.5
        ray.train.report({"loss": loss, "step": step, "lr": lr, "batch_size": batch_size})
