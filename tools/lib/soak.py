#!/usr/bin/python3
"""The soak of tools/soak: the lab under traffic for N minutes, with reloads and endpoint churn.

Traffic, all along (each a small Python client inside a pod or client namespace):
  - client → NodePort 192.168.67.8:30001: a new HTTP connection per request, 50 per second;
  - lab-sleeper → ClusterIP 10.107.169.79:80: one keep-alive connection, a request every 20 ms;
  - lab-sleeper → kube-dns 10.96.0.10:53 over UDP: a query every 20 ms, each from a new port.
Every RELOAD seconds the config is reloaded (SIGHUP), in a cycle: the endpoint of default/test-svc
that serves the keep-alive connection at the start removed (the connection is reset, the client
reconnects), added back, Service default/soak-extra added, removed.
Every SAMPLE seconds: flows live, packets, drops by reason (deltas), the gateway's resident size,
mbufs in use. At the end: every client's errors, the per-worker accounting, and a verdict:
  - no growth: resident size at the end within 4 MiB (or 5%) of the first sample after warm-up,
    live flows back under what one sample interval of traffic creates, mbufs back at baseline;
  - no unexplained drop: only reasons the churn explains (a removed endpoint's live flows:
    endpoint_gone and reject_endpoint_gone) may grow, and client errors only as many as those.
Writes the samples to a JSON file and prints a table; exit status 0 when the verdict holds.

usage: soak.py SVCGATE SOURCE_DIR [--minutes N] [--reload S] [--sample S] [--json FILE]
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "support"))
import checks  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("svcgate")
ap.add_argument("src")
ap.add_argument("--minutes", type=float, default=10)
ap.add_argument("--reload", type=float, default=15, help="seconds between reloads")
ap.add_argument("--sample", type=float, default=10, help="seconds between samples")
ap.add_argument("--json", default="soak.json")
args = ap.parse_args()
duration = args.minutes * 60

# Churn explains these drops: packets of live flows to an endpoint a reload removed.
CHURN = {"endpoint_gone", "reject_endpoint_gone"}


def refused(st):
    """Packets refused by reason: freed (drops) and answered with RST / port unreachable (rejects)."""
    out = dict(st.get("drops", {}))
    for k, v in st.get("rejects", {}).items():
        out[k] = out.get(k, 0) + v
    return out
# Normal operation: ARP replies to the gateway's own requests and ARPs about other hosts.
NORMAL = {"arp_consumed"}

HTTP_NEW = r"""
import http.client, json, sys, time
host, port, duration, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ok = err = 0; errors = []
end = time.monotonic() + duration
while time.monotonic() < end:
    t = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=3)
        c.request("GET", "/"); c.getresponse().read(); c.close(); ok += 1
    except Exception as e:
        err += 1; errors.append(repr(e)[:120])
    time.sleep(max(0.0, 1.0 / rate - (time.monotonic() - t)))
print(json.dumps({"ok": ok, "errors": err, "samples": errors[:5]}), flush=True)
"""

HTTP_KEEPALIVE = r"""
import http.client, json, sys, time
host, port, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ok = err = reconnects = 0; errors = []
c = http.client.HTTPConnection(host, port, timeout=3)
end = time.monotonic() + duration
while time.monotonic() < end:
    try:
        c.request("GET", "/"); body = c.getresponse().read(); ok += 1
        if ok == 1:
            print(body.decode().strip(), flush=True)  # the pod serving it: the one churn removes
    except Exception as e:
        # Its endpoint was removed by a reload (the gateway resets the connection): reconnect.
        err += 1; errors.append(repr(e)[:120]); reconnects += 1
        c.close(); c = http.client.HTTPConnection(host, port, timeout=3)
    time.sleep(0.02)
print(json.dumps({"ok": ok, "errors": err, "reconnects": reconnects, "samples": errors[:5]}), flush=True)
"""

DNS = r"""
import json, random, socket, struct, sys, time
server, duration = sys.argv[1], float(sys.argv[2])
ok = err = 0
end = time.monotonic() + duration
name = b"".join(bytes([len(p)]) + p for p in b"test-svc.default.svc.cluster.local".split(b".")) + b"\0"
while time.monotonic() < end:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    qid = random.randrange(65536)
    s.sendto(struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1), (server, 53))
    try:
        data = s.recv(1500); ok += struct.unpack("!H", data[:2])[0] == qid
    except OSError:
        err += 1
    s.close()
    time.sleep(0.02)
print(json.dumps({"ok": ok, "errors": err}), flush=True)
"""


def lab(script):
    return checks.lab(args.src, script)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


with open(os.path.join(args.src, "config", "lab.yaml")) as f:
    base = yaml.safe_load(f)
ctl_bin = os.path.join(os.path.dirname(args.svcgate), "svcgatectl")
sock = base["control"]["socket"]
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-soak-", delete=False)
tmp.close()
with open(tmp.name, "w") as f:
    yaml.safe_dump(base, f)



def cycle(victim):
    """The reload cycle, removing `victim` (an endpoint IP of default/test-svc) and adding it back."""
    without = copy.deepcopy(base)
    svc = next(s for s in without["services"] if s["name"] == "default/test-svc")
    svc["endpoints"] = [e for e in svc["endpoints"] if e["ip"] != victim]
    with_extra = copy.deepcopy(base)
    with_extra["services"].append({"name": "default/soak-extra", "cluster_ip": "10.96.77.7",
                                   "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                                   "endpoints": [{"ip": "10.244.3.6", "node": "kube-node-2"}]})
    return [(f"endpoint {victim} removed", without), (f"endpoint {victim} added", base),
            ("Service default/soak-extra added", with_extra), ("Service default/soak-extra removed", base)]


samples, reloads, clients = [], [], []
ok = True
try:
    r = lab(f"lab_up && lab_start_apps && lab_start_gateway {args.svcgate} {tmp.name}")
    if r.returncode != 0:
        print("lab did not come up:", r.stdout, r.stderr)
        sys.exit(1)
    pid = int(lab("cat $LAB_RUN/svcgate.pid").stdout.strip())
    mbufs0 = checks.gateway_stats(ctl_bin, sock).get("mempool", {}).get("in_use")
    d = str(duration)
    for name, ns, code, cargs in (("nodeport-new-connections", "client", HTTP_NEW, ["192.168.67.8", "30001", d, "50"]),
                                  ("clusterip-keepalive", "lab-sleeper", HTTP_KEEPALIVE, ["10.107.169.79", "80", d]),
                                  ("dns-udp", "lab-sleeper", DNS, ["10.96.0.10", d])):
        clients.append((name, subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", code, *cargs],
                                             stdout=subprocess.PIPE, text=True)))
    # The keep-alive connection's pod is the endpoint the churn removes, so that a live
    # connection really is reset under it.
    first_pod = dict(clients)["clusterip-keepalive"].stdout.readline().strip()
    CYCLE = cycle(checks.TEST_PODS.get(first_pod, "10.244.3.6"))
    print(f"keep-alive connection on {first_pod or '?'}; the churn removes {CYCLE[0][0].split()[1]}")
    start = time.monotonic()
    next_reload, next_sample, step = start + args.reload, start, 0
    prev = None
    print(f"{'t(s)':>6} {'flows':>7} {'rx/s':>8} {'rss MiB':>8} {'mbufs':>6}  drops in the interval")
    while time.monotonic() < start + duration:
        now = time.monotonic()
        if now >= next_reload:
            what, cfg = CYCLE[step % len(CYCLE)]
            good = checks.publish(args.src, cfg, tmp.name)
            reloads.append({"t": round(now - start, 1), "what": what, "ok": good})
            ok &= good
            step += 1
            next_reload += args.reload
        if now >= next_sample:
            st = checks.gateway_stats(ctl_bin, sock)
            rx = sum(w.get("rx", 0) for w in st.get("workers", []))
            drops = refused(st)
            s = {"t": round(now - start, 1), "flows": st.get("flows", {}).get("live"), "rx": rx,
                 "rss_kib": rss_kib(pid), "mbufs": st.get("mempool", {}).get("in_use"), "drops": drops}
            delta = {k: v - (prev["drops"].get(k, 0) if prev else 0) for k, v in drops.items()}
            s["drops_delta"] = {k: v for k, v in delta.items() if v}
            rate = (rx - prev["rx"]) / (s["t"] - prev["t"]) if prev and s["t"] > prev["t"] else 0
            print(f"{s['t']:>6.0f} {s['flows']!s:>7} {rate:>8.0f} {(s['rss_kib'] or 0) / 1024:>8.1f} "
                  f"{s['mbufs']!s:>6}  {s['drops_delta'] or '-'}", flush=True)
            samples.append(s)
            prev = s
            next_sample += args.sample
        time.sleep(0.2)

    results = {}
    for name, p in clients:
        out = p.stdout.read().strip().splitlines()
        p.wait(timeout=30)
        results[name] = json.loads(out[-1]) if out else {"ok": 0, "errors": 1, "samples": ["no summary"]}
    # Idle: flows age out on their own timers; the accounting must balance and mbufs come back.
    mbufs_end = checks.accounting(ctl_bin, sock, "after the soak", mbufs0)
    final = checks.gateway_stats(ctl_bin, sock)
    warm = samples[min(2, len(samples) - 1)]
    growth = (samples[-1]["rss_kib"] or 0) - (warm["rss_kib"] or 0)
    rss_ok = growth <= max(4096, 0.05 * (warm["rss_kib"] or 0))
    unexplained = {k: v for k, v in refused(final).items() if v and k not in CHURN | NORMAL}
    explained = sum(v for k, v in refused(final).items() if k in CHURN)
    created = final.get("flows", {}).get("created", 0)
    rate = created / max(1.0, samples[-1]["t"])
    bound = rate * 120 * 1.1 + 100
    peak = max(s["flows"] or 0 for s in samples)
    client_errors = sum(r.get("errors", 0) for r in results.values())
    answered = sum(r.get("ok", 0) for r in results.values())
    print()
    print(f"reloads: {len(reloads)} ({sum(r['ok'] for r in reloads)} applied)")
    for name, r in results.items():
        print(f"clients {name}: {r}")
    print(f"resident size: {(warm['rss_kib'] or 0) / 1024:.1f} MiB after warm-up, "
          f"{(samples[-1]['rss_kib'] or 0) / 1024:.1f} MiB at the end ({growth:+d} KiB)")
    normal = {k: v for k, v in refused(final).items() if v and k in NORMAL}
    print(f"drops explained by endpoint churn: {explained}; normal operation: {normal or 'none'}; "
          f"other drops: {unexplained or 'none'}")
    ok &= checks.check(peak <= bound, f"flows bounded: peak {peak} live, {rate:.0f} created/s x 120 s allows {bound:.0f}")
    ok &= checks.check(rss_ok, f"no growth of the resident size ({growth:+d} KiB after warm-up)")
    ok &= checks.check(not unexplained, f"no unexplained drop ({unexplained or 'none'})")
    ok &= checks.check(answered > 0 and client_errors <= explained,
                       f"{answered} requests answered; client errors ({client_errors}) only where churn reset "
                       f"a connection ({explained} packets of removed endpoints' flows)")
    ok &= checks.check(all(r["ok"] for r in reloads) and len(reloads) > 0, f"all {len(reloads)} reloads applied")
    ok &= checks.failures == 0
    with open(args.json, "w") as f:
        json.dump({"minutes": args.minutes, "reloads": reloads, "samples": samples, "clients": results,
                   "rss_growth_kib": growth, "unexplained_drops": unexplained, "flows_peak": peak, "flows_bound": bound, "mbufs_end": mbufs_end}, f, indent=1)
    print(f"samples written to {args.json}")
finally:
    for _, p in clients:
        if p.poll() is None:
            p.kill()
    lab("lab_stop_gateway; lab_down")
    os.unlink(tmp.name)
print("soak passed" if ok else "soak FAILED")
sys.exit(0 if ok else 1)
