#!/usr/bin/env python3
"""Capture small JAX device-memory profiles (pprof) for memtool's own tests.

Runs JAX on CPU; four virtual devices make the sharded case. Writes:
  OUT/training.prof            a toy training loop mid-step (params, grads, activations)
  OUT/leak1.prof .. leak4.prof a list that grows each step in `keep_history` (a leak)
  OUT/cache1.prof .. cache6.prof a dict that fills up to 3 entries and stops (bounded)
  OUT/sharded.prof             arrays sharded and replicated over 4 devices
then makes their absolute file names relative (scripts/relativize_fixture_paths.py).
usage: pip install jax && python3 scripts/capture_jax_pprof.py OUT
(memtool never needs Python; only these fixtures do.)
"""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/pprof"
os.makedirs(out, exist_ok=True)


def save(name):
    jax.profiler.save_device_memory_profile(os.path.join(out, name))


def init_params(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [jax.random.normal(k, (a, b)) * 0.01 for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def loss(params, x):
    for w in params:
        x = jnp.tanh(x @ w)
    return jnp.mean(x**2)


def training():
    params = init_params(jax.random.PRNGKey(0), [256, 512, 512, 128])
    x = jnp.ones((64, 256))
    grads = jax.grad(loss)(params, x)
    params = [p - 0.1 * g for p, g in zip(params, grads)]
    save("training.prof")
    return params, grads


history = []


def keep_history(step):
    history.append(jax.random.normal(jax.random.PRNGKey(step), (step * 1000,)))


cache = {}


def cached_table(step):
    key = step % 3
    if key not in cache:
        cache[key] = jnp.zeros((50_000,)) + key


def sharded():
    mesh = Mesh(np.array(jax.devices()).reshape(4), ("d",))
    a = jax.device_put(jnp.ones((1024, 256)), NamedSharding(mesh, P("d")))
    b = jax.device_put(jnp.ones((256, 256)), NamedSharding(mesh, P()))
    c = a @ b
    save("sharded.prof")
    return a, b, c


if __name__ == "__main__":
    kept = training()
    for step in range(1, 5):
        keep_history(step)
        save(f"leak{step}.prof")
    for step in range(1, 7):
        cached_table(step)
        save(f"cache{step}.prof")
    kept2 = sharded()
    # Last, below every line the fixtures' frames point at (which must not
    # move): <checkout>/scripts/X -> scripts/X, <venv>/lib/pythonX.Y/site-packages/
    # -> venv/lib/pythonX.Y/site-packages/, so no fixture carries a path of
    # the machine that made it.
    from relativize_fixture_paths import relativize_file

    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = ["training.prof", "sharded.prof"]
    names += [f"leak{step}.prof" for step in range(1, 5)]
    names += [f"cache{step}.prof" for step in range(1, 7)]
    for name in names:
        relativize_file(os.path.join(out, name), checkout, "pprof")
