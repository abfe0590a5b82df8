#!/usr/bin/python3
"""Runs one libFuzzer target for a bounded time from its seed corpus, in a scratch corpus (the
committed seeds stay as they are). Prints one "ok   ..." or "FAIL ..." line (tools/test counts
it); a finding is kept in the build directory as crash-*/leak-*/oom-* with the log.

usage: run_fuzzer.py FUZZER SEED_DIR ARTIFACT_DIR [SECONDS]   (SECONDS also from $FUZZ_SECONDS)
Longer on demand: FUZZ_SECONDS=3600 meson test -C build-san --suite fuzz
"""
import os
import re
import subprocess
import sys
import tempfile

fuzzer, seeds, artifacts = (os.path.abspath(a) for a in sys.argv[1:4])
seconds = int(os.environ.get("FUZZ_SECONDS") or (sys.argv[4] if len(sys.argv) > 4 else 20))
name = os.path.basename(fuzzer)
os.makedirs(artifacts, exist_ok=True)
env = dict(os.environ)
# ASan's quarantine holds freed memory back (256 MB by default); libFuzzer's RSS limit would
# take that for a leak in a long run.
env.setdefault("ASAN_OPTIONS", "quarantine_size_mb=16:malloc_context_size=10")
env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
with tempfile.TemporaryDirectory(prefix=f"svcgate-{name}-") as work:
    r = subprocess.run([fuzzer, f"-max_total_time={seconds}", "-rss_limit_mb=3000", "-malloc_limit_mb=512", "-timeout=25", "-print_final_stats=1",
                        f"-artifact_prefix={artifacts}/", work, seeds],
                       capture_output=True, text=True, timeout=seconds + 300, env=env, cwd=work)
log = r.stdout + r.stderr
runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
new = re.search(r"stat::new_units_added:\s*(\d+)", log)
cov = re.findall(r"cov: (\d+)", log)
if r.returncode == 0 and runs:
    print(f"ok   {name}: {runs.group(1)} inputs in {seconds} s, {new.group(1) if new else '?'} new units, "
          f"coverage {cov[-1] if cov else '?'} edges, no crash, no sanitizer report, no leak")
    sys.exit(0)
with open(os.path.join(artifacts, f"{name}.log"), "w") as f:
    f.write(log)
finding = re.findall(r"(ERROR: .*|runtime error: .*|Test unit written to .*)", log)
print(f"FAIL {name}: exit {r.returncode}: {' | '.join(finding[:3]) or log[-500:]}")
print(log[-4000:])
sys.exit(1)
