#!/usr/bin/env python3
"""Capture a small XSpace (`.xplane.pb`) from JAX on CPU for memtool's tests.

A jitted MLP training step runs three times under `jax.profiler.trace`. JAX on
CPU records no allocator events, but every compiled module's HloProto (with
its buffer assignment) is stored in the XSpace: the input of XProf's Memory
Viewer and of memtool's compiled-program memories. Its absolute file names are
made relative (scripts/relativize_fixture_paths.py) once written.
usage: pip install jax && python3 scripts/capture_jax_xspace.py tests/xspace/jax_mlp.xplane.pb
(memtool never needs Python; only this fixture does.)
"""
import glob
import os
import shutil
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/xspace/jax_mlp.xplane.pb"


def init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [jax.random.normal(k, (a, b)) * 0.01 for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def loss(params, x, y):
    for w in params[:-1]:
        x = jax.nn.relu(x @ w)
    return jnp.mean((x @ params[-1] - y) ** 2)


@jax.jit
def step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [p - 0.01 * g for p, g in zip(params, grads)]


params = init(jax.random.PRNGKey(0), [512, 1024, 1024, 10])
x = jnp.ones((256, 512))
y = jnp.zeros((256, 10))
logdir = tempfile.mkdtemp()
# Compiled modules are what the fixture is for: no Python or host trace
# events, which would only make it larger.
options = jax.profiler.ProfileOptions()
options.python_tracer_level = 0
options.host_tracer_level = 0
with jax.profiler.trace(logdir, profiler_options=options):
    for _ in range(3):
        params = step(params, x, y)
    jax.block_until_ready(params)
found = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
if len(found) != 1:
    sys.exit(f"expected one .xplane.pb under {logdir}, found {found}")
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
shutil.copyfile(found[0], out)
shutil.rmtree(logdir)
# Here, below every line the fixture's metadata points at (which must not
# move): <checkout>/scripts/X -> scripts/X, <venv>/lib/pythonX.Y/site-packages/
# -> venv/lib/pythonX.Y/site-packages/, so the fixture carries no path of the
# machine that made it.
from relativize_fixture_paths import relativize_file  # noqa: E402

relativize_file(out, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "xspace")
print("wrote", out, os.path.getsize(out), "bytes")
