#!/usr/bin/env python3
"""Drives `memtool mcp` with a real MCP client (the Python `mcp` SDK).

Run by .ci/run in a throwaway virtualenv (`pip install mcp`):

    python scripts/mcp_check.py path/to/memtool

From the repository root, with the shared fixtures in ../shared/fixtures. It
initializes a session, lists the tools, calls `peak` and `oom` on shared
fixtures and checks each tool's JSON document equals the command line's for
the same arguments, then checks that a path outside the root, a link out of
it, standard input and a hostile profile are refused with the command line's
one-line error. Exits non-zero with a message on the first difference.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLS = {"summary", "peak", "leaks", "diff", "frag", "oom", "ranks"}


def fail(message):
    print(f"mcp_check: {message}", file=sys.stderr)
    sys.exit(1)


def cli(memtool, root, args, env=None):
    """The command line's answer, run from `root` as the server's calls are."""
    run = subprocess.run(
        [memtool, *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return run.returncode, run.stdout, run.stderr.strip()


def text_of(result):
    return "\n".join(block.text for block in result.content if block.type == "text")


async def with_session(memtool, root, body):
    params = StdioServerParameters(command=memtool, args=["mcp", "--root", root])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            if init.server_info.name != "memtool":
                fail(f"server calls itself {init.server_info.name!r}")
            await body(session)


async def same_as_cli(session, memtool, root, tool, arguments, cli_args):
    """Calls `tool` and checks its document is the command line's JSON."""
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        fail(f"{tool} {arguments}: {text_of(result)}")
    code, stdout, stderr = cli(memtool, root, [tool, *cli_args, "--format", "json"])
    if code not in (0, 1):
        fail(f"memtool {tool} {cli_args}: exit {code}: {stderr}")
    if result.structured_content != json.loads(stdout):
        fail(f"{tool} {arguments}: the tool's JSON differs from memtool {tool} {cli_args} --format json")
    digest = text_of(result)
    if not digest.startswith(f"memtool {tool} ") or len(digest) > 40_000:
        fail(f"{tool}: digest of {len(digest)} characters:\n{digest[:2000]}")
    print(f"mcp_check: {tool} {arguments}: JSON equals the command line's; digest {len(digest)} characters")
    return result


async def refused(session, tool, arguments, expected):
    """Calls `tool`, which must fail with exactly the line `expected`."""
    result = await session.call_tool(tool, arguments)
    got = text_of(result)
    if not result.is_error or got != expected:
        fail(f"{tool} {arguments}: expected the error {expected!r}, got {got!r} (is_error={result.is_error})")
    print(f"mcp_check: {tool} {arguments}: refused: {got}")


async def main():
    if len(sys.argv) != 2:
        fail("usage: mcp_check.py MEMTOOL")
    memtool = os.path.abspath(sys.argv[1])
    repo = os.getcwd()
    fixtures = os.path.realpath(os.path.join(repo, "..", "shared", "fixtures"))
    if not os.path.isdir(fixtures):
        fail(f"{fixtures} is missing")

    async def on_fixtures(session):
        tools = (await session.list_tools()).tools
        names = {tool.name for tool in tools}
        if names != TOOLS:
            fail(f"tools {sorted(names)}, expected {sorted(TOOLS)}")
        peak = next(tool for tool in tools if tool.name == "peak")
        for option in ("files", "by", "memory", "top", "budget", "max_decompressed"):
            if option not in peak.input_schema["properties"]:
                fail(f"peak takes no {option}: {peak.input_schema}")
        for output in ("format", "output", "width"):
            if output in peak.input_schema["properties"]:
                fail(f"peak takes {output}, which is the server's to choose")

        await same_as_cli(session, memtool, fixtures, "peak", {"files": ["pprof/memory.prof"]}, ["pprof/memory.prof"])
        await same_as_cli(
            session, memtool, fixtures, "peak",
            {"files": ["torch/bcrafton_memory_snapshot.pickle"], "by": "phase", "top": 3},
            ["torch/bcrafton_memory_snapshot.pickle", "--by", "phase", "--top", "3"],
        )
        await same_as_cli(
            session, memtool, fixtures, "peak",
            {"files": ["xspace/jax_transformer_small.xplane.pb"], "module": ["jit_train_step"]},
            ["xspace/jax_transformer_small.xplane.pb", "--module", "jit_train_step"],
        )
        # A compiled program that does not fit: oom's post-mortem.
        result = await same_as_cli(
            session, memtool, fixtures, "oom",
            {"files": ["xspace/jax_mlp.xplane.pb"], "capacity": "1MiB"},
            ["xspace/jax_mlp.xplane.pb", "--capacity", "1MiB"],
        )
        if not result.structured_content.get("oom"):
            fail("oom found nothing to explain in jax_mlp at 1 MiB")
        # A gate that fails is an answer, not an error (the command exits 1).
        result = await same_as_cli(
            session, memtool, fixtures, "peak",
            {"files": ["pprof/memory.prof"], "budget": "1KiB"},
            ["pprof/memory.prof", "--budget", "1KiB"],
        )
        if "a gate failed" not in text_of(result):
            fail("peak --budget 1KiB: the digest does not say the gate failed")

        # Paths outside the root: the command line under the same root says
        # the same line.
        env = {"MEMTOOL_ROOT": fixtures}
        for outside in ["../fixtures/../../shared", "/etc/passwd", "../no/such.prof"]:
            code, _, line = cli(memtool, fixtures, ["peak", outside], env)
            if code != 2 or "outside" not in line:
                fail(f"memtool peak {outside} under MEMTOOL_ROOT: exit {code}: {line}")
            await refused(session, "peak", {"files": [outside]}, line)
        await refused(
            session, "peak", {"files": ["-"]},
            "memtool: -: standard input is the MCP channel; give a file under the server's root",
        )

    await with_session(memtool, fixtures, on_fixtures)

    # A link from inside the root to a profile outside it is refused.
    with tempfile.TemporaryDirectory() as root:
        os.symlink(os.path.join(fixtures, "pprof", "memory.prof"), os.path.join(root, "link.prof"))
        root = os.path.realpath(root)

        async def on_links(session):
            code, _, line = cli(memtool, root, ["peak", "link.prof"], {"MEMTOOL_ROOT": root})
            if code != 2 or "outside" not in line:
                fail(f"memtool peak link.prof under MEMTOOL_ROOT: exit {code}: {line}")
            await refused(session, "peak", {"files": ["link.prof"]}, line)

        await with_session(memtool, root, on_links)

    # A hostile profile: the same one-line error as the command line.
    async def on_repo(session):
        for hostile in ["tests/broken/global-reduce.pickle", "tests/broken/bomb.gz", "tests/broken/deep.pickle"]:
            code, _, line = cli(memtool, repo, ["peak", hostile])
            if code != 2 or not line.startswith(f"memtool: {hostile}: ") or "\n" in line:
                fail(f"memtool peak {hostile}: exit {code}: {line}")
            await refused(session, "peak", {"files": [hostile]}, line)
        await refused(
            session, "peak", {"files": ["tests/pprof/training.prof"], "by": "colour"},
            "memtool: invalid value 'colour' for '--by <KEY>'",
        )

    await with_session(memtool, repo, on_repo)
    print("mcp_check: ok")


asyncio.run(main())
