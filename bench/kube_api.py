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

  3. with --lb-services N (the cluster's load balancer, docs/load-balancer.md): two gateways, one
     the Lease's writer, N LoadBalancer Services created at once; the time from the last creation
     to the last status written, the writes (each Service once), and the CPU seconds each
     gateway spent meanwhile (the reader only re-learns from status); at --lb-qps/--lb-burst
     (default the config's, 20 and 30: N/20 s by construction), or unthrottled with 0.

usage: kube_api.py SVCGATE OUT.json [--services N] [--rate R] [--seconds S] [--min-sync-ms M]
                   [--lb-services N [--lb-qps Q --lb-burst B]]"""
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


def stop(p):
    """SIGTERM, then SIGKILL after 30 s."""
    p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


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
    ap.add_argument("--lb-services", type=int, default=0)
    ap.add_argument("--lb-qps", type=int, default=20)
    ap.add_argument("--lb-burst", type=int, default=30)
    a = ap.parse_args()
    if a.lb_services:
        return lb_first_allocation(a)
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
            stop(p)
            srv.stop()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


def cpu_seconds(pid):
    """User and system CPU of a process so far (/proc/PID/stat, clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lb_first_allocation(a):
    """Two gateways, N LoadBalancer Services at once: until the last status is written."""
    qps, burst = (a.lb_qps, a.lb_burst) if a.lb_qps else (100000, 100000)
    with tempfile.TemporaryDirectory() as d:
        srv = kube_apiserver.Server(d, tokens=("gw1", "gw2"))
        procs = {}
        for name in ("gw1", "gw2"):
            kc = srv.kubeconfig(f"{d}/{name}.kc", token=name)
            with open(f"{d}/{name}.yaml", "w") as f:
                f.write("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '512', --no-pci, --no-telemetry]\n"
                        "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
                        "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
                        f"control: {{socket: {d}/{name}.sock, watch: false, metrics: off}}\n"
                        f"cluster: {{node_name: {name}}}\n"
                        f"kubernetes:\n  api: {{kubeconfig: {kc}, min_sync_period_ms: {a.min_sync_ms}}}\n"
                        f"  load_balancer: {{write_qps: {qps}, write_burst: {burst}, "
                        "pools: [{name: bench, addresses: ['10.240.0.0/16']}]}\n")
            procs[name] = subprocess.Popen([a.svcgate, "--config", f"{d}/{name}.yaml"], stdout=subprocess.DEVNULL,
                                           stderr=open(f"{d}/{name}.log", "w"))
        ctl = os.path.join(os.path.dirname(a.svcgate), "svcgatectl")

        def role(name):
            r = subprocess.run([ctl, "--socket", f"{d}/{name}.sock", "status", "--json"], capture_output=True,
                               text=True, timeout=30)
            return json.loads(r.stdout).get("kubernetes", {}).get("load_balancer", {}).get("role") if r.returncode == 0 else None
        result = {"lb_services": a.lb_services, "write_qps": qps if a.lb_qps else "unthrottled",
                  "write_burst": burst if a.lb_qps else "unthrottled"}
        try:
            end = time.monotonic() + 60
            writer = None
            while not writer and time.monotonic() < end:
                writer = next((n for n in procs if role(n) == "writer"), None)
                time.sleep(0.2)
            if not writer:
                raise SystemExit("no writer: " + open(f"{d}/gw1.log").read()[-1000:])
            reader = "gw2" if writer == "gw1" else "gw1"
            cpu0 = {n: cpu_seconds(p.pid) for n, p in procs.items()}
            t0 = time.monotonic()
            for i in range(a.lb_services):
                srv.put({"apiVersion": "v1", "kind": "Service",
                         "metadata": {"name": f"lb-{i:05}", "namespace": "bench", "uid": f"u{i}",
                                      "creationTimestamp": rfc3339nano(1767225600 + i)[:19] + "Z"},
                         "spec": {"type": "LoadBalancer", "clusterIP": f"10.{97 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}",
                                  "clusterIPs": [f"10.{97 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"],
                                  "ipFamilies": ["IPv4"], "ports": [{"port": 80, "protocol": "TCP"}]}})
            created = time.monotonic()
            done = lambda: sum(1 for w in srv.writes if w["subresource"] == "status" and w["code"] == 200)
            limit = created + 120 + 2 * a.lb_services / (qps if a.lb_qps else 1000)
            while done() < a.lb_services and time.monotonic() < limit:
                time.sleep(0.1)
            writes = [w for w in srv.writes if w["subresource"] == "status"]
            last = max((w["time"] for w in writes if w["code"] == 200), default=created)
            cpu1 = {n: cpu_seconds(p.pid) for n, p in procs.items()}
            result.update({
                "create_seconds": round(created - t0, 2),
                "last_status_after_create_s": round(last - created, 2),
                "last_status_after_first_create_s": round(last - t0, 2),
                "status_writes_ok": sum(1 for w in writes if w["code"] == 200),
                "status_writes_other": sum(1 for w in writes if w["code"] != 200),
                "services_written_once": len({w["key"] for w in writes if w["code"] == 200}) == a.lb_services and
                sum(1 for w in writes if w["code"] == 200) == a.lb_services,
                "writes_by_reader": sum(1 for w in writes if w["who"] == reader),
                "writer_cpu_s": round(cpu1[writer] - cpu0[writer], 2),
                "reader_cpu_s": round(cpu1[reader] - cpu0[reader], 2)})
        finally:
            for p in procs.values():
                stop(p)
            srv.stop()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


main()
