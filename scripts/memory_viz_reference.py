#!/usr/bin/env python3
"""The peak, start and end of MemoryViz's "Active Memory Timeline" for PyTorch
snapshot pickles: the figures torch's own viewer (pytorch.org/memory_viz,
torch.cuda._memory_viz.trace_plot) draws, which memtool's snapshot peaks must
equal. Standard library only (a snapshot is plain dicts and lists).

usage: scripts/memory_viz_reference.py FILE... > tests/torch/memory_viz_shared.json

tests/torch/memory_viz_shared.json holds these numbers for the snapshots of
../shared/fixtures/torch (numbers only; the files stay in ../shared), so the
test that compares memtool with them needs nothing but the fixtures.
"""
import json
import os
import pickle
import sys


def memory_viz_active_timeline(data, device):
    """The "Active Memory Timeline" of MemoryViz.js (pytorch/pytorch torch/utils/viz/MemoryViz.js, read at commit
    00067369c9339bed950762afec327514d6fa2566; _memory_viz.trace_plot loads it from pytorch@main): its
    annotate_snapshot and process_alloc_data, line by line, keeping only the sizes. Returns the y-axis maximum
    (`max_size`: the peak the chart draws), the total at the start (blocks live before the trace) and at the end.
    - a `free_requested` directly followed by the `free_completed` of its address is one `free` (annotate_snapshot);
    - `alloc` adds the trace `size` (the request); `free`/`free_completed` of an address allocated in the trace
      removes that allocation; of one never allocated in the trace, it is an allocation live from the start,
      of the free's `size`;
    - end-state blocks (addresses computed as the segment's address plus the sizes before them, as
      annotate_snapshot does) that are `active_allocated` and not live in the trace are live from the start, at
      their `requested_size` (`requested_size || size` for blocks without `frames`, or `history[0].real_size`);
    - an `alloc` at an address already live leaves the earlier allocation live (it is never freed);
    - max_size is the largest total after each action (the start itself is not one), or, with no action, the
      total of the blocks live at the start."""
    traces = data.get('device_traces') or []
    trace = traces[device] if device < len(traces) else []
    events = []
    for t in trace:
        if (t['action'] == 'free_completed' and events and events[-1]['action'] == 'free_requested'
                and events[-1]['addr'] == t['addr']):
            events[-1] = dict(events[-1], action='free')
            continue
        events.append(t)
    sizes, initially, actions, addr_to_alloc = [], [], [], {}
    for e in events:
        if e['action'] == 'alloc':
            sizes.append(e['size'])
            addr_to_alloc[e['addr']] = len(sizes) - 1
            actions.append(len(sizes) - 1)
        elif e['action'] in ('free', 'free_completed'):
            if e['addr'] in addr_to_alloc:
                actions.append(addr_to_alloc.pop(e['addr']))
            else:
                sizes.append(e['size'])
                initially.append(len(sizes) - 1)
                actions.append(len(sizes) - 1)
    for seg in data.get('segments', []):
        if seg.get('device') != device:
            continue
        addr = seg['address']
        for b in seg['blocks']:
            block_addr, addr = addr, addr + b['size']
            if 'frames' in b:
                requested = b.get('requested_size')
            elif b.get('history'):
                requested = b.get('requested_size') or b['history'][0].get('real_size')
            else:
                requested = b.get('requested_size') or b['size']
            if b['state'] == 'active_allocated' and block_addr not in addr_to_alloc:
                sizes.append(requested)
                initially.append(len(sizes) - 1)
    initially.reverse()
    if not actions and initially:
        actions.append(initially.pop())
    live = set(initially)
    total = start = sum(sizes[i] for i in initially)
    max_size = 0
    for elem in actions:
        # the first action of an element adds it, the second removes it
        if elem in live:
            live.remove(elem)
            total -= sizes[elem]
        else:
            live.add(elem)
            total += sizes[elem]
        max_size = max(total, max_size)
    return {'max_size': max_size, 'start': start, 'end': total, 'actions': len(actions)}


def main(paths):
    out = {}
    for path in paths:
        with open(path, "rb") as f:
            data = pickle.load(f)
        if isinstance(data, list):
            # An old snapshot: a bare list of segments, no trace to draw.
            continue
        traces = data.get("device_traces") or []
        devices = {seg.get("device") for seg in data.get("segments", [])}
        devices |= {i for i, t in enumerate(traces) if t}
        if traces:
            out[os.path.basename(path)] = {
                str(d): memory_viz_active_timeline(data, d)
                for d in sorted(x for x in devices if isinstance(x, int))
            }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
