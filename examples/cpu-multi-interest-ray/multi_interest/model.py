"""A toy multi-interest retrieval model: each user has K interest vectors; score = max dot product."""

import random


def make_user(rng: random.Random, interests: int, dim: int) -> list[list[float]]:
    return [[rng.gauss(0.0, 1.0) for _ in range(dim)] for _ in range(interests)]


def score(user: list[list[float]], item: list[float]) -> float:
    return max(sum(a * b for a, b in zip(vec, item, strict=True)) for vec in user)


def recall_at_k(users: list[list[list[float]]], items: list[list[float]], positives: list[int], k: int) -> float:
    hits = 0
    for user, positive in zip(users, positives, strict=True):
        ranked = sorted(range(len(items)), key=lambda i: -score(user, items[i]))
        hits += positive in ranked[:k]
    return hits / max(1, len(users))
