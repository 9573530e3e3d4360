"""NCCL's all-reduce through torch.distributed, f32, 1 MiB to 1 GiB: the reference
for `bench --dist` (issue 39). Run on a machine with 2 GPUs:

    python3 -m torch.distributed.run --nproc_per_node 2 bench/torch_allreduce.py
"""
import os
import statistics

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    if rank == 0:
        print(f"NCCL all_reduce f32 over {size} ranks ({torch.cuda.get_device_name()}): ms (GB/s of the array)")
    for i in range(6):
        nbytes = 1 << (20 + 2 * i)
        x = torch.full((nbytes // 4,), float(rank + 1), device="cuda")
        dist.all_reduce(x)
        assert x[0].item() == size * (size + 1) / 2
        reps = 3 if nbytes >= 1 << 28 else 7
        times = []
        for _ in range(reps + 1):
            dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dist.all_reduce(x)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        ms = statistics.median(times[1:])
        if rank == 0:
            print(f"{nbytes:>10} {ms:8.3f} ({nbytes / ms / 1e6:6.1f})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
