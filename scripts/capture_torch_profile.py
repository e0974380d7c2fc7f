#!/usr/bin/env python3
"""Capture small PyTorch memory profiles of a toy training loop, for trying
memtool by hand (not run in CI; memtool never needs Python).

Trains a 2-layer TransformerEncoder for a few steps under
`torch.profiler.profile(profile_memory=True, with_stack=True)` and writes:

  OUT/torch_cpu.pt.trace.json.gz     the Chrome trace ([memory] events)
  OUT/torch_cpu.memory_timeline.json `prof.export_memory_timeline(device="cpu")`
  OUT/torch_cpu.snapshot.pickle      the profile in snapshot form, by torch's
                                     own `_memory_viz._profile_to_snapshot`

and, when a CUDA device is present, the caching allocator's own snapshot of
the same loop on the GPU:

  OUT/torch_cuda.snapshot.pickle     `torch.cuda.memory._dump_snapshot`

usage: pip install torch && python3 scripts/capture_torch_profile.py OUT
       memtool summary OUT/torch_cpu.snapshot.pickle
       memtool peak OUT/torch_cpu.pt.trace.json.gz
"""
import gzip
import os
import pickle
import shutil
import sys

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

out = sys.argv[1] if len(sys.argv) > 1 else "torch-profiles"
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


def model_and_data(device):
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 128), nn.TransformerEncoder(layer, num_layers=2), nn.Linear(128, 1000))
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randint(0, 1000, (8, 64), device=device)
    y = torch.randint(0, 1000, (8, 64), device=device)
    return model, opt, x, y


def step(model, opt, x, y):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 1000), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def cpu_profile():
    model, opt, x, y = model_and_data("cpu")
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=0, active=3),
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        for _ in range(3):
            step(model, opt, x, y)
            prof.step()
    trace = os.path.join(out, "torch_cpu.pt.trace.json")
    prof.export_chrome_trace(trace)
    with open(trace, "rb") as src, gzip.open(trace + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(trace)
    prof.export_memory_timeline(os.path.join(out, "torch_cpu.memory_timeline.json"), device="cpu")
    from torch.cuda import _memory_viz

    snapshot = _memory_viz._profile_to_snapshot(prof)
    with open(os.path.join(out, "torch_cpu.snapshot.pickle"), "wb") as f:
        pickle.dump(snapshot, f)


def cuda_snapshot():
    model, opt, x, y = model_and_data("cuda")
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    for _ in range(3):
        step(model, opt, x, y)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out, "torch_cuda.snapshot.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)


cpu_profile()
if torch.cuda.is_available():
    cuda_snapshot()
print("wrote", ", ".join(sorted(os.listdir(out))))
