#!/usr/bin/python3
"""What a worker costs its core under light load, by dataplane.poll (adaptive, busy), in the
single-gateway lab (tools/lib/lab.sh; network namespaces only).

For each mode: the gateway is started with that mode; then, for SECONDS, the client downloads two
blobs paced at RATE (3 MiB/s) each through the NodePort and pings the gateway PINGS (200) times a
second.
Measured: the worker thread's CPU time over the window (utime + stime of the lcore thread, from
/proc), the ping round trips (median, 99th percentile), the download rate, and the port's missed
frames. One JSON object per mode on stdout, and a table on stderr.

usage: poll_share.py SVCGATE SOURCE_DIR [--seconds S] [--rate MIB_S] [--pings N] [--json FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "support"))
import checks  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("svcgate")
ap.add_argument("src")
ap.add_argument("--seconds", type=float, default=15)
ap.add_argument("--rate", type=float, default=3, help="MiB/s of each of the two downloads")
ap.add_argument("--pings", type=int, default=200, help="pings a second, at most 1000 (ping floods below 1 ms)")
ap.add_argument("--json")
args = ap.parse_args()
args.pings = min(args.pings, 1000)
ctl = os.path.join(os.path.dirname(args.svcgate), "svcgatectl")
SOCK = "/run/svcgate-lab/svcgate.sock"
RATE = int(args.rate * 1024 * 1024)
CLK = os.sysconf("SC_CLK_TCK")


def worker_ticks(pid):
    """utime + stime of svcgate's worker lcore threads (DPDK 22.11 names them rte-worker-N)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(("rte-worker", "lcore-worker")):
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def received(state):
    try:
        with open(state) as f:
            return sum(d["bytes"] for d in json.load(f))
    except (OSError, ValueError):
        return 0


def missed():
    st = checks.gateway_stats(ctl, SOCK)
    return sum(p.get("rx_missed", 0) for p in st.get("ports", {}).values())


def run(mode, cfg_text, work):
    cfg = os.path.join(work, f"lab-{mode}.yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text.replace("dataplane:\n", f"dataplane:\n  poll: {mode}\n", 1))
    r = checks.lab(args.src, f"lab_start_gateway {args.svcgate} {cfg}")
    if r.returncode != 0:
        sys.exit(f"poll_share: the gateway did not start: {r.stderr[-500:]}")
    pid = int(open("/run/svcgate-lab/svcgate.pid").read())
    time.sleep(2)
    state, stop = os.path.join(work, f"dl-{mode}"), os.path.join(work, f"stop-{mode}")
    dl = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3",
                           os.path.join(args.src, "tests/e2e/downloads.py"), state, stop, str(RATE),
                           str(int(RATE * (args.seconds + 10))), "http://192.168.67.8:30001", "http://192.168.67.8:30001"])
    time.sleep(2)
    m0, t0, c0, b0 = missed(), time.monotonic(), worker_ticks(pid), received(state)
    count = int(args.seconds * args.pings)
    ping = subprocess.run(["ip", "netns", "exec", "client", "ping", "-q", "-n", "-i", str(1 / args.pings), "-c", str(count),
                           "-W", "1", "192.168.67.8"], capture_output=True, text=True)
    took, c1, m1, b1 = time.monotonic() - t0, worker_ticks(pid), missed(), received(state)
    open(stop, "w").close()
    dl.kill()
    checks.lab(args.src, "lab_stop_gateway")
    return {"mode": mode, "seconds": round(took, 1), "worker_cpu": round((c1 - c0) / CLK / took, 3),
            "ping": ping.stdout.strip().splitlines()[-1] if ping.stdout else ping.stderr[-200:],
            "download_mb_s": round((b1 - b0) / 1e6 / took, 2), "missed": m1 - m0}


def main():
    with open(os.path.join(args.src, "config/lab.yaml")) as f:
        cfg_text = f.read()
    work = tempfile.mkdtemp(prefix="svcgate-poll-")
    r = checks.lab(args.src, "lab_up && lab_start_apps")
    if r.returncode != 0:
        sys.exit(f"poll_share: lab did not come up: {r.stderr[-500:]}")
    out = []
    try:
        for mode in ("busy", "adaptive"):
            res = run(mode, cfg_text, work)
            out.append(res)
            print(json.dumps(res), flush=True)
    finally:
        checks.lab(args.src, "lab_stop_gateway; lab_down")
        shutil.rmtree(work, ignore_errors=True)
    for r in out:
        print(f"{r['mode']:>9}: worker {100 * r['worker_cpu']:.0f}% of a core, {r['ping']}, missed {r['missed']}",
              file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


main()
