#!/usr/bin/python3
"""tools/check-commits refuses a subject CONTRIBUTING.md does not take, and only after the commit
that brought it: in a clone of the repository, a good commit passes, then one over 72 characters
and one without a known area fail, each named.

usage: check_commits_test.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402

src = sys.argv[1]


def check(cond, what, detail=""):
    if not checks.check(cond, what) and detail:
        print("      " + str(detail).replace("\n", "\n      "))
    return cond


with tempfile.TemporaryDirectory() as d:
    r = subprocess.run(["git", "clone", "-q", src, d], capture_output=True, text=True)
    if not check(r.returncode == 0, "a clone of the repository", r.stderr):
        checks.finish("check-commits")
    tool = os.path.join(d, "tools", "check-commits")

    def commit(subject):
        subprocess.run(["git", "-C", d, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                        "-m", subject], check=True)
        return subprocess.run([sys.executable, tool, d], capture_output=True, text=True)

    r = subprocess.run([sys.executable, tool, d], capture_output=True, text=True)
    check(r.returncode == 0, "the history as it is passes", r.stdout[-600:])
    r = commit("lb: a subject as CONTRIBUTING asks")
    check(r.returncode == 0 and "ok   commit" in r.stdout, "a good subject passes", r.stdout[-600:])
    r = commit("tests: " + "a subject far longer than seventy-two characters, " * 2)
    check(r.returncode == 1 and "characters (at most 72)" in r.stdout, "a subject over 72 characters fails",
          r.stdout[-600:])
    r = commit("fixed the thing")
    check(r.returncode == 1 and "no `area: ` prefix" in r.stdout, "a subject without an area fails", r.stdout[-600:])
    subprocess.run(["git", "-C", d, "reset", "-q", "--hard", "HEAD~1"], check=True)
    r = commit("everything: a subject with an area that is none")
    check(r.returncode == 1 and "area `everything` is no folder" in r.stdout, "an unknown area fails",
          r.stdout[-600:])
checks.finish("check-commits")
