#!/usr/bin/env python3
"""Capture the profiler-made snapshots that measure memtool's inferred
categories against PyTorch's own (crates/memtool/tests/categories.rs).

Each is three training steps of a small model on the CPU under
`torch.profiler.profile(profile_memory=True, with_stack=True)`, turned into a
snapshot by torch's own `_memory_viz._profile_to_snapshot`, whose allocations
carry the memory profiler's `category`. memtool infers the categories while
ignoring those and compares. The runs:

  cnn_adamw, cnn_sgd_momentum                 a small CNN
  transformer_adamw, transformer_sgd_momentum a 2-layer transformer encoder
  transformer_adamw_checkpoint                the same, each layer under
  cnn_sgd_momentum_checkpoint                 torch.utils.checkpoint

written as OUT/<run>.snapshot.pickle.gz (crates/memtool/tests/data/categories/ by
default; 10-120 KB each).
Frame names carry no absolute path: this checkout's and the virtualenv's
prefixes are cut (`site-packages/` is kept, so memtool still sees library
frames as such).

usage: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch
       /tmp/venv/bin/python scripts/capture_torch_categories.py [OUT]
"""
import gzip
import os
import pickle
import re
import sys

import torch
from torch import nn
from torch.cuda import _memory_viz
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CHECKOUT, "crates", "memtool", "tests", "data", "categories")
os.makedirs(out, exist_ok=True)


class Checkpointed(nn.Module):
    """Runs `inner` under activation checkpointing: its activations are made
    again in the backward pass instead of kept."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


def cnn(checkpointed):
    blocks = [
        nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()),
        nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU()),
    ]
    if checkpointed:
        blocks = [Checkpointed(b) for b in blocks]
    model = nn.Sequential(*blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    x = torch.randn(8, 3, 32, 32)
    y = torch.randint(0, 10, (8,))
    return model, x, y


def transformer(checkpointed):
    layers = [
        nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
        for _ in range(2)
    ]
    if checkpointed:
        layers = [Checkpointed(layer) for layer in layers]
    model = nn.Sequential(nn.Embedding(500, 64), *layers, nn.Linear(64, 500))
    x = torch.randint(0, 500, (4, 32))
    y = torch.randint(0, 500, (4, 32))
    return model, x, y


def optimizer(name, params):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3)
    return torch.optim.SGD(params, lr=1e-2, momentum=0.9)


def step(model, opt, x, y):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


PREFIXES = [re.escape(CHECKOUT + os.sep)]
for path in sys.path:
    if path.endswith("site-packages"):
        PREFIXES.append(re.escape(os.path.dirname(path) + os.sep))
STRIP = re.compile("|".join(PREFIXES))


def relative(value):
    """The snapshot with this machine's path prefixes cut from every string."""
    if isinstance(value, str):
        return STRIP.sub("", value)
    if isinstance(value, list):
        return [relative(v) for v in value]
    if isinstance(value, dict):
        return {k: relative(v) for k, v in value.items()}
    return value


def capture(name, make_model, opt_name, checkpointed):
    torch.manual_seed(0)
    model, x, y = make_model(checkpointed)
    opt = optimizer(opt_name, model.parameters())
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=0, active=3, repeat=1),
        profile_memory=True,
        record_shapes=True,
        with_stack=True,
    ) as prof:
        for _ in range(3):
            step(model, opt, x, y)
            prof.step()
    snapshot = relative(_memory_viz._profile_to_snapshot(prof))
    # Gzipped (memtool reads it so) with no name or time in the header: the
    # same run gives the same bytes but for the addresses it ran at.
    path = os.path.join(out, f"{name}.snapshot.pickle.gz")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as f:
        pickle.dump(snapshot, f, protocol=4)


RUNS = [
    ("cnn_adamw", cnn, "adamw", False),
    ("cnn_sgd_momentum", cnn, "sgd", False),
    ("cnn_sgd_momentum_checkpoint", cnn, "sgd", True),
    ("transformer_adamw", transformer, "adamw", False),
    ("transformer_sgd_momentum", transformer, "sgd", False),
    ("transformer_adamw_checkpoint", transformer, "adamw", True),
]
for run in RUNS:
    capture(*run)
print("wrote", ", ".join(sorted(os.listdir(out))))
