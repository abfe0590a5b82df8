#!/usr/bin/python3
"""Following the API server (kubernetes.api), measured against the tests' own API server
(tests/support/kube_apiserver.py) on loopback, with a net_null port that receives nothing (no-rx=1: the worker idles):

  1. first sync: N Services and N EndpointSlices listed in pages of 500; the daemon's own
     measure (status kubernetes.api.first_sync_ms) from the moment both LISTs are complete to the
     first publish done, and the wall time from the daemon's start to that publish;
  2. programming latency under churn: RATE EndpointSlice edits per second for SECONDS, each with
     endpoints.kubernetes.io/last-change-trigger-time set to the moment it is sent; the daemon's
     quantiles of (publish done - trigger time) over the run, and its publishes per second (which
     min_sync_period bounds).

usage: kube_api.py SVCGATE OUT.json [--services N] [--rate R] [--seconds S] [--min-sync-ms M]"""
import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
import kube_apiserver  # noqa: E402


def rfc3339nano(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("svcgate")
    ap.add_argument("out")
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--min-sync-ms", type=int, default=1000)
    a = ap.parse_args()
    ctl = os.path.join(os.path.dirname(a.svcgate), "svcgatectl")
    with tempfile.TemporaryDirectory() as d:
        srv = kube_apiserver.Server(d, bookmark_seconds=5)
        objs = kube_apiserver.generated(a.services)
        for o in objs:
            srv.put(o)
        kc = srv.kubeconfig(f"{d}/kubeconfig")
        sock = f"{d}/gw.sock"
        with open(f"{d}/gw.yaml", "w") as f:
            f.write("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '512', --no-pci, --no-telemetry]\n"
                    "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
                    "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
                    f"control: {{socket: {sock}, watch: false, metrics: off}}\n"
                    f"kubernetes:\n  api: {{kubeconfig: {kc}, min_sync_period_ms: {a.min_sync_ms}}}\n")
        log = open(f"{d}/gw.log", "w")
        t0 = time.monotonic()
        p = subprocess.Popen([a.svcgate, "--config", f"{d}/gw.yaml"], stdout=subprocess.DEVNULL, stderr=log)

        status = {}

        def api():
            nonlocal status
            r = subprocess.run([ctl, "--socket", sock, "status", "--json"], capture_output=True, text=True,
                               timeout=30)
            if r.returncode != 0:
                return {}
            status = json.loads(r.stdout)
            return status.get("kubernetes", {}).get("api") or {}

        result = {"services": a.services, "rate": a.rate, "seconds": a.seconds, "min_sync_ms": a.min_sync_ms}
        try:
            while time.monotonic() - t0 < 300:
                s = api()
                if s.get("first_sync_ms", -1) >= 0:
                    break
                if p.poll() is not None:
                    raise SystemExit("svcgate stopped: " + open(f"{d}/gw.log").read()[-1000:])
                time.sleep(0.05)
            result["first_sync_ms"] = s.get("first_sync_ms")
            result["first_publish_reload_ms"] = round(1e3 * status.get("last_reload_seconds", 0), 1)
            result["start_to_first_publish_s"] = round(time.monotonic() - t0, 3)
            result["publishes_at_first_sync"] = s.get("publishes")
            result["list_requests"] = srv.count("services", watch=False) + srv.count("endpointslices", watch=False)
            before = s.get("publishes", 0)
            slices = [o for o in objs if o["kind"] == "EndpointSlice"]
            rng = random.Random(1)
            start = time.monotonic()
            sent = 0
            while True:
                now = time.monotonic()
                if now - start >= a.seconds:
                    break
                due = int((now - start) * a.rate)
                for _ in range(due - sent):
                    sl = rng.choice(slices)
                    sl["endpoints"][0]["conditions"]["ready"] = not sl["endpoints"][0]["conditions"]["ready"]
                    sl["metadata"].setdefault("annotations", {})[
                        "endpoints.kubernetes.io/last-change-trigger-time"] = rfc3339nano(time.time())
                    srv.put(sl)
                    sent += 1
                time.sleep(0.002)
            elapsed = time.monotonic() - start
            time.sleep(a.min_sync_ms / 1000 + 1)  # the last changes published
            s = api()
            prog = s.get("programming", {})
            result.update({"changes_sent": sent, "changes_per_second": round(sent / elapsed, 1),
                           "programming_samples": prog.get("samples"), "programming_p50_ms": prog.get("p50_ms"),
                           "programming_p99_ms": prog.get("p99_ms"), "programming_max_ms": prog.get("max_ms"),
                           "publishes": s.get("publishes", 0) - before,
                           "publishes_per_second": round((s.get("publishes", 0) - before) / (elapsed + a.min_sync_ms / 1000 + 1), 3),
                           "last_publish_reload_ms": round(1e3 * status.get("last_reload_seconds", 0), 1),
                           "relists": sum(k["relists"] for k in s.get("kinds", {}).values()),
                           "bad_input": sum(s.get("bad_input", {}).values())})
        finally:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            srv.stop()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


main()
