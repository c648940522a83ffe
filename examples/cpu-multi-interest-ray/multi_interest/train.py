"""Evaluate the toy multi-interest retriever on synthetic data, sharded over the Ray workers."""

import os
import random

import ray
import yaml

from multi_interest.model import make_user, recall_at_k


@ray.remote
def shard(seed: int, users: int, items: int, interests: int, dim: int) -> float:
    rng = random.Random(seed)
    catalog = [[rng.gauss(0.0, 1.0) for _ in range(dim)] for _ in range(items)]
    population = [make_user(rng, interests, dim) for _ in range(users)]
    positives = [rng.randrange(items) for _ in range(users)]
    return recall_at_k(population, catalog, positives, k=10)


def main() -> None:
    ray.init(address="auto")
    workers = int(os.environ.get("TAU_NUM_WORKERS", "1"))
    recalls = ray.get([shard.remote(seed, 50, 200, 4, 16) for seed in range(workers * 2)])
    print(yaml.safe_dump({"shards": len(recalls), "mean_recall_at_10": round(sum(recalls) / len(recalls), 4)}))


if __name__ == "__main__":
    main()
