#!/usr/bin/env python3
"""Capture XLA dumps and XSpace traces of one small JAX script on CPU, for
memtool's tests of compiled programs read from a dump and matched across runs.

Writes, under OUT (default tests/xla):
  dump_proto/  `XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_proto`: for the
               training step and the scaled-down `a @ a`, the optimized
               module as `*.hlo.pb` (an xla.HloProto with its buffer
               assignment) and its `*-memory-usage-report.pb`;
  dump_text/   the same run without `--xla_dump_hlo_as_proto`: the
               `*-buffer-assignment.txt` and `*-memory-usage-report.txt`;
  and, under tests/xspace/, two XSpace traces of the same script
  (`counters_run1.xplane.pb`, `counters_run2.xplane.pb`), the second with
  one more `jax.jit` compiled before training, so every program's compile
  counter (the `(N)` of `jit_train_step(N)`) differs between them.

Only the files of the two programs are kept, and absolute paths of this
machine are made relative (scripts/relativize_fixture_paths.py).

usage: pip install jax && python3 scripts/capture_xla_dumps.py [OUT]
(memtool never needs Python; only these fixtures do.)
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)

# The workload, run in a child so XLA_FLAGS is read before JAX starts.
WORKLOAD = r"""
import os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp

extra_compile, trace_dir = sys.argv[1] == "1", sys.argv[2]


def init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [jax.random.normal(k, (a, b)) * 0.01 for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def loss(params, x, y):
    for w in params[:-1]:
        x = jax.nn.relu(x @ w)
    return jnp.mean((x @ params[-1] - y) ** 2)


@jax.jit
def train_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return [p - 0.01 * g for p, g in zip(params, grads)]


@jax.jit
def oom():
    # The seed's `a @ a` of a 327680x327680 array, scaled down.
    a = jax.random.normal(jax.random.PRNGKey(1), (512, 512), dtype=jnp.bfloat16)
    return a @ a


def run():
    if extra_compile:
        # One more program compiled first: every later compile counter moves.
        jax.block_until_ready(jax.jit(lambda v: v * 2 + 1)(jnp.arange(8.0)))
    params = init(jax.random.PRNGKey(0), [128, 256, 256, 10])
    x = jnp.ones((64, 128))
    y = jnp.zeros((64, 10))
    for _ in range(2):
        params = train_step(params, x, y)
    jax.block_until_ready(params)
    jax.block_until_ready(oom())


if trace_dir == "-":
    run()
else:
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.host_tracer_level = 0
    with jax.profiler.trace(trace_dir, profiler_options=options):
        run()
"""

KEEP = ("jit_train_step", "jit_oom")


def workload(flags, extra_compile, trace_dir):
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
    subprocess.run(
        [sys.executable, "-c", WORKLOAD, "1" if extra_compile else "0", trace_dir],
        env=env,
        check=True,
    )


def relativize_text(path):
    """Absolute paths of this machine in a text dump, made relative."""
    import re

    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    text = text.replace(CHECKOUT + "/", "")
    text = re.sub(r"/[^\s\"']*?/lib/(python\d+(?:\.\d+)?)/(site|dist)-packages/",
                  r"venv/lib/\1/\2-packages/", text)
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)


def keep(dump, out, suffixes):
    """Copies the dump's files of the kept programs with one of `suffixes`."""
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "*")):
        os.remove(old)
    kept = []
    for path in sorted(glob.glob(os.path.join(dump, "*"))):
        name = os.path.basename(path)
        if any(f".{p}." in name for p in KEEP) and name.endswith(suffixes):
            shutil.copyfile(path, os.path.join(out, name))
            kept.append(name)
    if len(kept) < 2 * len(suffixes):
        sys.exit(f"expected the files of {KEEP} in {dump}, kept {kept}")
    return kept


def main():
    sys.path.insert(0, HERE)
    from relativize_fixture_paths import relativize_file

    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CHECKOUT, "tests", "xla")
    texts = ("-buffer-assignment.txt", "-memory-usage-report.txt")
    with tempfile.TemporaryDirectory() as tmp:
        proto = os.path.join(tmp, "proto")
        workload(f"--xla_dump_to={proto} --xla_dump_hlo_as_proto", False, "-")
        # With protos XLA writes the module and its memory usage report as
        # protos, and no buffer assignment text.
        for name in keep(proto, os.path.join(out, "dump_proto"),
                         ("after_optimizations.hlo.pb", "-memory-usage-report.pb")):
            path = os.path.join(out, "dump_proto", name)
            if name.endswith(".pb"):
                relativize_file(path, CHECKOUT, "xspace")
            else:
                relativize_text(path)
        text = os.path.join(tmp, "text")
        workload(f"--xla_dump_to={text}", False, "-")
        for name in keep(text, os.path.join(out, "dump_text"), texts):
            relativize_text(os.path.join(out, "dump_text", name))
        for run, extra in (("run1", False), ("run2", True)):
            logdir = os.path.join(tmp, run)
            workload("", extra, logdir)
            found = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            if len(found) != 1:
                sys.exit(f"expected one .xplane.pb under {logdir}, found {found}")
            dest = os.path.join(CHECKOUT, "tests", "xspace", f"counters_{run}.xplane.pb")
            shutil.copyfile(found[0], dest)
            relativize_file(dest, CHECKOUT, "xspace")
            print("wrote", dest, os.path.getsize(dest), "bytes")


if __name__ == "__main__":
    main()
