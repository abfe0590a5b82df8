#!/usr/bin/python3
"""tools/check-layout fails on an include that runs back up: a copy of the tree passes, then the
same copy with one include of a later folder added (kube/ including api/, the include issue 70
removed) fails on that rule, naming the file and line, and on no other rule. Likewise in
dataplane/: flow/ including pipeline/parse.h (where PacketMeta lived before packet/) fails.

usage: check_layout_test.py SOURCE_DIR"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import finish  # noqa: E402
import checks  # noqa: E402


def check(cond, what, detail=""):
    if not checks.check(cond, what) and detail:
        print("      " + str(detail).replace("\n", "\n      "))
    return cond

src = sys.argv[1]
tool = os.path.join(src, "tools", "check-layout")
with tempfile.TemporaryDirectory() as d:
    for part in ("control", "dataplane", "bench"):
        shutil.copytree(os.path.join(src, part), os.path.join(d, part),
                        ignore=shutil.ignore_patterns("*.json", "*.png", "results"))
    r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "ok   layers: control/'s folders in order" in r.stdout,
          "a copy of the tree passes check-layout", r.stdout[-500:])
    victim = os.path.join(d, "control", "kube", "backoff.h")
    with open(victim) as f:
        lines = f.read().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("#include")) + 1
    lines.insert(at, '#include "control/api/views.h"\n')
    with open(victim, "w") as f:
        f.writelines(lines)
    r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True, timeout=120)
    out = r.stdout
    check(r.returncode == 1 and "FAIL layers: control/'s folders in order" in out and
          f"control/kube/backoff.h:{at + 1}: kube/ includes api/, which comes after it" in out,
          "an include of a later folder fails check-layout, with its file and line", out[-800:])
    check(out.count("FAIL") == 1, "and no other rule", out[-800:])
    with open(victim, "w") as f:  # put back
        f.writelines(line for line in lines if line != '#include "control/api/views.h"\n')

    victim = os.path.join(d, "dataplane", "flow", "conntrack.cpp")
    with open(victim) as f:
        lines = f.read().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("#include")) + 1
    lines.insert(at, '#include "dataplane/pipeline/parse.h"\n')
    with open(victim, "w") as f:
        f.writelines(lines)
    r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True, timeout=120)
    out = r.stdout
    check(r.returncode == 1 and "FAIL layers: dataplane/'s folders in order" in out and
          f"dataplane/flow/conntrack.cpp:{at + 1}: flow/ includes pipeline/, which comes after it" in out and
          out.count("FAIL") == 1,
          "dataplane/: flow/ including pipeline/ fails check-layout, on that rule alone",
          out[-800:])
finish("check-layout")
