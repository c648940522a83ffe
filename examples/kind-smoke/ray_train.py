"""CPU Ray smoke: fan a few tasks out to the workers and check the results."""

import os

import ray


@ray.remote
def square(x: int) -> int:
    return x * x


def main() -> None:
    ray.init(address="auto")
    results = ray.get([square.remote(i) for i in range(8)])
    assert results == [i * i for i in range(8)], results
    print("marker:", os.environ.get("KIND_RAY_MARKER"), "results:", results)
    print("workers:", os.environ.get("TAU_NUM_WORKERS"), "backend:", os.environ.get("TAU_DIST_BACKEND"))


if __name__ == "__main__":
    main()
