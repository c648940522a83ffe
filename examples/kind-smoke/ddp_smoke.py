"""Two-node gloo all-reduce: every rank contributes its rank number and checks the sum."""

import os

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank)])
    dist.all_reduce(value)
    expected = world * (world - 1) / 2
    assert value.item() == expected, (value.item(), expected)
    print(f"rank {rank}/{world} on {os.environ.get('HOSTNAME')}: all-reduce sum {value.item()} ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
