#!/usr/bin/env python3
"""Write the XLA out-of-memory reports memtool's tests read (tests/xla/).

XLA's TPU compile-time report cannot be produced without a TPU, and the GPU
runtime's out-of-memory message without a GPU large enough to fail in an
interesting way, so these logs are written here by hand, following the
format XLA prints (the TPU compiler's `Ran out of memory in memory space
...` report with its usage breakdown and largest allocations, the one-line
`Allocation (size=...) would exceed memory (size=...) :: #allocationN [...]`,
and the GPU runtime's `Out of memory while trying to allocate N bytes.` with
the BFC allocator's dump). Every size is computed here from the shapes and
their tiled layouts and printed as XLA prints sizes (binary units, two
decimals; one for K), so the figures of a report agree with each other as a
real one's do.

Usage: scripts/make_xla_reports.py [OUT_DIR]   (default: tests/xla)
"""

import math
import os
import sys

BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s32": 4, "f32": 4, "u32": 4}
K, M, G = 1 << 10, 1 << 20, 1 << 30


def human(n):
    """A size as the TPU compiler prints it: 0B, 980.0K, 5.41M, 17.60G."""
    if n < K:
        return f"{n}B"
    if n < M:
        return f"{n / K:.1f}K"
    if n < G:
        return f"{n / M:.2f}M"
    return f"{n / G:.2f}G"


def parse(shape):
    """'f32[4,9]{1,0:T(8,128)}' -> (dtype, dims, minor_to_major, first tile)."""
    dtype, rest = shape.split("[", 1)
    dims_text, layout = rest.split("]", 1)
    dims = [int(d) for d in dims_text.split(",")] if dims_text else []
    layout = layout.strip("{}")
    order, _, tiles = layout.partition(":")
    minor_to_major = [int(d) for d in order.split(",")] if order else []
    tile = []
    if tiles.startswith("T("):
        tile = [int(d) for d in tiles[2 : tiles.index(")")].split(",")]
    return dtype, dims, minor_to_major, tile


def sizes(shape):
    """(unpadded, padded) bytes: XLA's ShapeUtil::ArraySize, first tile only."""
    dtype, dims, minor_to_major, tile = parse(shape)
    unpadded = math.prod(dims) * BYTES[dtype]
    ordered = [dims[d] for d in minor_to_major]
    elements = 1
    for i in range(max(len(tile), len(ordered))):
        dim = ordered[i] if i < len(ordered) else 1
        t = tile[len(tile) - 1 - i] if i < len(tile) else 1
        elements *= -(-dim // t) * t
    return unpadded, elements * BYTES[dtype]


def allocation(rank, shape, label, kind, operator=None):
    unpadded, padded = sizes(shape)
    lines = [f"  {rank}. Size: {human(padded)}"]
    if operator:
        lines.append(f"     Operator: {operator}")
    lines.append(f"     Shape: {shape}")
    if padded != unpadded:
        lines.append(f"     Unpadded size: {human(unpadded)}")
        lines.append(
            f"     Extra memory due to padding: {human(padded - unpadded)} "
            f"({padded / unpadded:.1f}x expansion)"
        )
    lines.append(f"     XLA label: {label.format(shape=shape)}")
    lines.append(f"     Allocation type: {kind}")
    lines.append("     ==========================")
    return "\n".join(lines) + "\n", padded, unpadded


def compile_report(space, capacity, reserved, glob, scoped, temp_extra, allocs,
                   arguments=None, output=None, padded_unpadded=False):
    """A compile-time report whose HLO temp holds the listed allocations plus
    `temp_extra` bytes."""
    texts, temp = [], temp_extra
    padded_sum = unpadded_sum = 0
    for a in allocs:
        text, padded, unpadded = allocation(*a)
        texts.append(text)
        temp += padded
        padded_sum += padded
        unpadded_sum += unpadded
    program = glob + scoped + temp
    used = reserved + program
    head = (f"Ran out of memory in memory space {space}. Used {human(used)} of "
            f"{human(capacity)} {space}. Exceeded {space} capacity by "
            f"{human(used - capacity)}.\n\n")
    usage = [f"Total {space} usage >= {human(used)}:",
             f"    reserved        {human(reserved)} ",
             f"    program          {human(program)} "]
    usage.append("    arguments       unknown size " if arguments is None
                 else f"    arguments       {human(arguments)} ")
    out = "\nOutput size unknown.\n" if output is None else (
        f"\nOutput size {human(output)}; shares {human(0)} with arguments.\n")
    if padded_unpadded:
        # The listed allocations and the rest of the temp, which is unpadded.
        rest = temp - padded_sum
        temp_detail = (f"({unpadded_sum * 100 / temp:.1f}% utilization: Unpadded "
                       f"({human(unpadded_sum + rest)}) Padded ({human(temp)}), 0.4% "
                       f"fragmentation ({human(temp // 250)}))")
    else:
        temp_detail = f"(92.8% utilization, 0.3% fragmentation ({human(temp // 330)}))"
    requirement = [f"Program {space} requirement {human(program)}:",
                   f"    global           {human(glob)}",
                   f"    scoped            {human(scoped)}",
                   f"    HLO temp         {human(temp)} {temp_detail}"]
    return (head + "\n".join(usage) + "\n" + out + "\n" + "\n".join(requirement)
            + f"\n\n  Largest program allocations in {space}:\n\n" + "\n".join(texts))


def tpu_compile_log():
    hbm = compile_report(
        "hbm", 16 * G, 528 * M, 980 * K, 5_672_960, 3_600_000_000,
        [
            (1, "s32[29360128,10]{1,0:T(8,128)}",
             "%iota.2 = {shape} iota(), iota_dimension=1, metadata={{op_type=\"OneHot\" "
             "op_name=\"jit(train_step)/labels\"}}",
             "HLO temp", 'op_type="OneHot" op_name="jit(train_step)/labels"'),
            (2, "f32[4,128,128,9,18]{4,3,0,2,1:T(8,128)}",
             "%fusion.1668 = {shape} fusion(s32[4,128,128,9]{{3,0,2,1:T(4,128)}} %copy.130), "
             "kind=kLoop, calls=%fused_computation.1304, metadata={{op_type=\"OneHot\" "
             "op_name=\"jit(train_step)/one_hot\" source_file=\"train.py\" source_line=41}}",
             "HLO temp",
             'op_type="OneHot" op_name="jit(train_step)/one_hot" source_file="train.py" '
             "source_line=41"),
            (3, "bf16[4,512,512,64]{3,0,2,1:T(4,128)(2,1)}",
             "%fusion.20231 = ({shape}) fusion(f32[64]{{0:T(256)}} "
             "%get-tuple-element.73199, bf16[4,512,51...",
             "HLO temp"),
            (4, "f32[4,256,256,256]{3,0,2,1:T(4,128)}",
             "%reduce-window.989 = {shape} reduce-window(f32[4,256,256,256]{{3,0,2,1:T(4,128)}} "
             "%add.77, f32[] %constant.1), window={{size=1x3x3x1}}, to_apply=%max.1",
             "HLO temp",
             'op_type="MaxPool" op_name="jit(train_step)/resnet/max_pool" '
             'source_file="model.py" source_line=88'),
        ],
    )
    vmem = compile_report(
        "vmem", 16 * M, 0, 12 * K, 0, 16 * M + 1_572_864,
        [
            (1, "bf16[512,3000]{1,0:T(8,128)(2,1)}",
             "%copy.3 = {shape} copy(bf16[512,3000]{{0,1:T(8,128)(2,1)}} %p1)",
             "HLO temp"),
            (2, "f32[64,1000]{1,0:T(8,128)}",
             "%fusion.7 = {shape} fusion(f32[64,1000]{{1,0:T(8,128)}} %p0), kind=kLoop",
             "scoped"),
        ],
        arguments=0, output=0, padded_unpadded=True,
    )
    return (
        "I1126 14:02:11.481020  4242 compiler.cc:312] Compiling jit_train_step for 1 devices\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 120, in <module>\n'
        "    state, loss = train_step(state, batch)\n"
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
        + hbm
        + "\n"
        "E1126 14:05:40.100311  4242 tpu_compiler.cc:91] compile failed for jit_eval_step: "
        + vmem
        + "\nStep 79; loss 1.7639\n"
    )


def tpu_allocation_log():
    shape = "u8[327680,327680]{1,0:T(8,128)(4,1)}"
    _, padded = sizes(shape)
    line = (f"RESOURCE_EXHAUSTED: Allocation (size={padded}) would exceed memory "
            f"(size={16 * G}) :: #allocation7 [shape = '{shape}', space=hbm, "
            "size = 0xffffffffffffffff, tag = 'output of xor_convert_fusion@{}'] :: "
            "<no-hlo-instruction>")
    vmem_shape = "u8[134217728]{0}"
    vmem = (f"XlaRuntimeError: RESOURCE_EXHAUSTED: Allocation (size={134217728}) would "
            f"exceed memory (size={64 * M}) :: #allocation25 [shape = '{vmem_shape}', "
            "space=vmem, size = 0x8000000, tag = 'scoped memory for "
            "gated_matmul_kernel.2'] :: gated_matmul_kernel.2")
    return (
        "Traceback (most recent call last):\n"
        '  File "oom.py", line 12, in <module>\n'
        "    oom()\n"
        f"jaxlib.xla_extension.XlaRuntimeError: {line}\n"
        "\nDuring handling of the above exception, another exception occurred:\n\n"
        f"jax.errors.JaxRuntimeError: {line}\n"
        f"{vmem}\n"
    )


def dump_allocation_log():
    """The one-line report for the program the XLA dumps of `tests/xla/`
    hold (`jit_oom`, `a @ a` of a 512x512 bf16 array, captured on CPU by
    `capture_xla_dumps.py`), as a device of 256 KiB would raise it: its
    output is the dump's allocation 0, of 512 KiB. Written by hand (the CPU
    does not fail) in the format of `tpu_allocation_log`."""
    shape = "bf16[512,512]{1,0}"
    _, padded = sizes(shape)
    line = (f"RESOURCE_EXHAUSTED: Allocation (size={padded}) would exceed memory "
            f"(size={256 * 1024}) :: #allocation0 [shape = '{shape}', space=hbm, "
            f"size = {hex(padded)}, tag = 'output of dot@{{}}'] :: <no-hlo-instruction>")
    return (
        "Traceback (most recent call last):\n"
        '  File "capture_xla_dumps.py", line 60, in <module>\n'
        "    oom(a)\n"
        f"jax.errors.JaxRuntimeError: {line}\n"
    )


def gpu_log():
    limit, request = 15_753_315_328, 214_748_364_800
    chunks = [(256, 27), (1280, 3), (1_048_576, 40), (402_653_184, 12), (4_294_967_296, 2)]
    in_use = sum(s * n for s, n in chunks)
    free = [(0x7F0A2E000000 + 0x100 * i, 512) for i in range(3)] + [(0x7F0C00000000, 6_291_456)]
    pool = in_use + sum(s for _, s in free)
    prefix = "2026-11-26 14:20:01.747{:03d}: I external/xla/xla/tsl/framework/bfc_allocator.cc:{}] "
    lines = [
        "2026-11-26 14:20:01.746001: W external/xla/xla/tsl/framework/bfc_allocator.cc:501] "
        f"Allocator (GPU_0_bfc) ran out of memory trying to allocate 200.00GiB (rounded to "
        f"{request})requested by op ",
        prefix.format(1, 1049) + "BFCAllocator dump for GPU_0_bfc",
        prefix.format(2, 1056) + "Bin (256): \tTotal Chunks: 30, Chunks in use: 27. 7.5KiB "
        "allocated for chunks. 6.8KiB in use in bin. 1.2KiB client-requested in use in bin.",
        prefix.format(3, 1072) + f"Bin for 200.00GiB was 256.00MiB, Chunk State: ",
        prefix.format(4, 1085) + f"Next region of size {pool}",
        prefix.format(5, 1105) + "InUse at 7f0a2df00000 of size 256 next 1",
    ]
    for i, (addr, size) in enumerate(free):
        lines.append(prefix.format(6 + i, 1105) + f"Free  at {addr:x} of size {size} next {i + 2}")
    lines.append(prefix.format(10, 1110) + "     Summary of in-use Chunks by size: ")
    for s, n in chunks:
        total = s * n
        unit = "GiB" if total >= G else "MiB" if total >= M else "KiB"
        div = {"GiB": G, "MiB": M, "KiB": K}[unit]
        lines.append(prefix.format(11, 1113) + f"{n} Chunks of size {s} totalling {total / div:.2f}{unit}")
    lines.append(prefix.format(12, 1117) + f"Sum Total of in-use chunks: {in_use / G:.2f}GiB")
    lines.append(prefix.format(13, 1119) + f"Total bytes in pool: {pool} memory_limit_: {limit} "
                 f"available bytes: {limit - pool} curr_region_allocation_bytes_: {2 * limit}")
    lines.append(prefix.format(14, 1124) + "Stats: ")
    stats = [("Limit", limit), ("InUse", in_use), ("MaxInUse", in_use + 1_048_576),
             ("NumAllocs", 2_797_476), ("MaxAllocSize", 4_294_967_296), ("Reserved", 0),
             ("PeakReserved", 0), ("LargestFreeBlock", 0)]
    for k, v in stats:
        lines.append(f"{k + ':':<20}{v:>20}")
    lines.append("")
    lines.append("2026-11-26 14:20:01.747582: W external/xla/xla/tsl/framework/bfc_allocator.cc:512] "
                 + "*" * 60 + "_" * 40)
    lines.append("2026-11-26 14:20:01.747621: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2985] "
                 "Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying "
                 f"to allocate {request} bytes.")
    lines.append("Traceback (most recent call last):")
    lines.append('  File "oom.py", line 12, in <module>')
    lines.append("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                 f"trying to allocate {request} bytes.")
    return "\n".join(lines) + "\n"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "xla")
    os.makedirs(out, exist_ok=True)
    files = {
        "tpu_compile_oom.log": tpu_compile_log(),
        "tpu_allocation_oom.log": tpu_allocation_log(),
        "dump_allocation_oom.log": dump_allocation_log(),
        "gpu_bfc_oom.log": gpu_log(),
        "gpu_oom_line.txt": "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
                            "to allocate 214748364800 bytes.\n",
    }
    for name, text in files.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
