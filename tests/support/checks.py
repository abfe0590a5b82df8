"""Shared by the Python tests: one "ok   ..." or "FAIL ..." line per check (tools/test counts
them), the failure count, and the lab helpers of the end-to-end tests."""
import subprocess
import sys

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def finish(title=None):
    if title:
        print(f"{'passed' if failures == 0 else 'failed'}: {title}")
    sys.exit(1 if failures else 0)


def lab(src, script):
    """Runs bash with tools/lib/lab.sh sourced."""
    return subprocess.run(["bash", "-c", f"source {src}/tools/lib/lab.sh; {script}"], capture_output=True,
                          text=True, timeout=120)


def ns(name, *cmd, timeout=60):
    """A command inside a network namespace; bytes out."""
    return subprocess.run(["ip", "netns", "exec", name, *cmd], capture_output=True, timeout=timeout)


def curl(name, *args, timeout=30):
    """curl inside a namespace: the body, or None when it failed."""
    r = ns(name, "curl", "-s", "-m", "10", *args, timeout=timeout)
    return r.stdout.decode(errors="replace") if r.returncode == 0 else None
