"""The timing shared by the PyTorch reference scripts: the median of CUDA-event
timings of `iters` calls, over 7 samples after a warm-up."""
import statistics

import torch


def time_ms(fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(7):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)
