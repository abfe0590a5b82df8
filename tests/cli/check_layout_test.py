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


def with_include(tree, path, include):
    """check-layout's output and exit code on `tree` with `include` added after the first include of
    `path`, the include's line number, and the file put back as it was."""
    victim = os.path.join(tree, path)
    with open(victim) as f:
        text = f.read()
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("#include")) + 1
    lines.insert(at, f'#include "{include}"\n')
    with open(victim, "w") as f:
        f.writelines(lines)
    r = subprocess.run([sys.executable, tool, tree], capture_output=True, text=True, timeout=120)
    with open(victim, "w") as f:
        f.write(text)
    return r.stdout, r.returncode, at + 1


with tempfile.TemporaryDirectory() as d:
    for part in ("control", "dataplane", "bench"):
        shutil.copytree(os.path.join(src, part), os.path.join(d, part),
                        ignore=shutil.ignore_patterns("*.json", "*.png", "results"))
    r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "ok   layers: control/'s folders in order" in r.stdout,
          "a copy of the tree passes check-layout", r.stdout[-500:])
    out, rc, line = with_include(d, "control/kube/backoff.h", "control/api/views.h")
    check(rc == 1 and "FAIL layers: control/'s folders in order" in out and
          f"control/kube/backoff.h:{line}: kube/ includes api/, which comes after it" in out,
          "an include of a later folder fails check-layout, with its file and line", out[-800:])
    check(out.count("FAIL") == 1, "and no other rule", out[-800:])
    out, rc, line = with_include(d, "dataplane/flow/conntrack.cpp", "dataplane/pipeline/parse.h")
    check(rc == 1 and "FAIL layers: dataplane/'s folders in order" in out and
          f"dataplane/flow/conntrack.cpp:{line}: flow/ includes pipeline/, which comes after it" in out and
          out.count("FAIL") == 1,
          "dataplane/: flow/ including pipeline/ fails check-layout, on that rule alone", out[-800:])
finish("check-layout")
