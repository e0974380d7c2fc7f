#!/usr/bin/env python3
"""What TensorBoard does when its Memory Viewer opens the modules of an XSpace:
XProf extracts the modules beside the file (xspace_to_tool_names), then
converts each one (memory_viewer, memory space 0). The reference of
`scripts/bench --formats hlo --compare`; needs `pip install xprof`.
The input is linked into a fresh run directory, because XProf writes there."""
import glob
import os
import shutil
import sys
import tempfile

from xprof.convert import raw_to_tool_data as r

tmp = tempfile.mkdtemp()
try:
    run = os.path.join(tmp, "plugins", "profile", "run")
    os.makedirs(run)
    x = os.path.join(run, "host.xplane.pb")
    os.symlink(os.path.abspath(sys.argv[1]), x)
    r.xspace_to_tool_names([x])
    for p in sorted(glob.glob(os.path.join(run, "*.hlo_proto.pb"))):
        module = os.path.basename(p)[: -len(".hlo_proto.pb")]
        r.xspace_to_tool_data([x], "memory_viewer", {"module_name": module, "memory_space": "0"})
finally:
    shutil.rmtree(tmp)
