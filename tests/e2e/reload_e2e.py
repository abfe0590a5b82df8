#!/usr/bin/python3
"""Reloads under continuous traffic, on the lab (issue #4 acceptance).

Two keep-alive HTTP connections run all along - client → NodePort and lab-sleeper → ClusterIP -
one request every 20 ms each, while svcgate reloads its config (SIGHUP): an endpoint added, an
endpoint removed (one neither connection uses), a Service added, a Service removed, and a broken
config. Checks: every request answered, by the same pod, no gap over 300 ms, no TCP retransmission
by the clients or the pods; the broken config changed nothing; new connections never reach the
removed endpoint.

usage: reload_e2e.py SVCGATE SOURCE_DIR
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]


def lab(script):
    return checks.lab(src, script)


def curl(ns, url):
    body = checks.curl(ns, url)
    return body.strip() if body is not None else None

MIN_REQUESTS = 50  # each client's, at least


def retrans(ns):
    with subprocess.Popen(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"], stdout=subprocess.PIPE, text=True) as p:
        lines = [l.split() for l in p.stdout if l.startswith("Tcp:")]
    return int(lines[1][lines[0].index("RetransSegs")])


def log_count(marker):
    return checks.log_count(src, marker)


def publish(cfg, path, marker="reloaded"):
    return checks.publish(src, cfg, path, marker)


POD_IP = checks.TEST_PODS

with open(os.path.join(src, "config", "lab.yaml")) as f:
    base = yaml.safe_load(f)
svc = next(s for s in base["services"] if s["name"] == "default/test-svc")
all_eps = svc["endpoints"]
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-reload-", delete=False)
tmp.close()
stop_clients = tmp.name + ".stop"

# Start with two of the three test pods; the third is "added" under traffic.
cfg = copy.deepcopy(base)
start_eps = [e for e in all_eps if e["ip"] != "10.244.3.6"]
next(s for s in cfg["services"] if s["name"] == "default/test-svc")["endpoints"] = start_eps
with open(tmp.name, "w") as f:
    yaml.safe_dump(cfg, f)
clients = []
try:
    r = lab(f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, "lab up, svcgate running")
    if r.returncode != 0:
        sys.exit(1)
    sock, ctl_bin = base["control"]["socket"], os.path.join(os.path.dirname(svcgate), "svcgatectl")
    mbufs = checks.accounting(ctl_bin, sock, "at start")
    TCP_NS = ("client", "lab-sleeper", "test-pod-1", "test-pod-2", "test-pod-3")
    rt0 = {ns: retrans(ns) for ns in TCP_NS}
    for ns, host, port in (("client", "192.168.67.8", "30001"), ("lab-sleeper", "10.107.169.79", "80")):
        clients.append(subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", checks.KEEPALIVE, host,
                                         port, stop_clients, str(MIN_REQUESTS)], stdout=subprocess.PIPE, text=True))
    used = {c.stdout.readline().strip() for c in clients}
    check(used <= set(POD_IP), f"both connections answered: {sorted(used)}")

    def svc_of(c):
        return next(s for s in c["services"] if s["name"] == "default/test-svc")

    # 1. An endpoint added.
    cfg = copy.deepcopy(cfg)
    svc_of(cfg)["endpoints"] = list(all_eps)
    check(publish(cfg, tmp.name), "reload 1: endpoint 10.244.3.6 added")
    time.sleep(0.8)
    # 2. An endpoint removed: one neither connection uses.
    victim = sorted(set(POD_IP) - used)[0]
    cfg = copy.deepcopy(cfg)
    svc_of(cfg)["endpoints"] = [e for e in all_eps if e["ip"] != POD_IP[victim]]
    check(publish(cfg, tmp.name), f"reload 2: endpoint {victim} removed")
    time.sleep(0.8)
    # 3. A Service added.
    cfg = copy.deepcopy(cfg)
    cfg["services"].append({"name": "default/extra", "cluster_ip": "10.96.100.9",
                            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                            "endpoints": [{"ip": "10.244.2.4"}]})
    # ... with a setting the flow table was created with: applied at the next start, and said so.
    cfg["dataplane"]["flow_table"]["timeouts"] = {"udp_unreplied": 31}
    restarts = log_count("dataplane.flow_table.timeouts changed; that takes a restart")
    check(publish(cfg, tmp.name), "reload 3: Service default/extra added")
    # At least once: the write also wakes the file watcher (watch: true), whose reload may follow
    # SIGHUP's before the log is read, and says it again (the file still differs from what runs).
    said = log_count("dataplane.flow_table.timeouts changed; that takes a restart") - restarts
    check(said >= 1, f"a change of the flow-table timeouts is logged as taking a restart ({said} times)")
    check(curl("lab-sleeper", "http://10.96.100.9/") == "test-pod-1", "the added Service answers")
    time.sleep(0.5)
    # 4. A Service removed.
    cfg = copy.deepcopy(cfg)
    cfg["services"] = [s for s in cfg["services"] if s["name"] != "default/extra"]
    check(publish(cfg, tmp.name), "reload 4: Service default/extra removed")
    time.sleep(0.5)
    # 5. A broken config: refused, the running one stays.
    check(publish("services:\n  - name: default/x\n    cluster_ip: 10.96.0.300\n", tmp.name,
                  "the running config stays"), "reload 5: a broken config is refused")
    time.sleep(0.5)
    with open(tmp.name, "w") as f:
        yaml.safe_dump(cfg, f)

    open(stop_clients, "w").close()
    results = [json.loads(c.stdout.readline()) for c in clients]
    for c in clients:
        c.wait(timeout=30)
    for ns, res in zip(("client → NodePort", "lab-sleeper → ClusterIP"), results):
        check(not res["errors"] and res["requests"] > MIN_REQUESTS,
              f"{ns}: {res['requests']} requests on one connection, no error {res['errors']}")
        check(len(res["pods"]) == 1, f"{ns}: one pod all along ({res['pods']})")
        check(res["max_gap"] is not None and res["max_gap"] < 0.3,
              f"{ns}: longest gap between answers {res['max_gap'] and round(res['max_gap'] * 1000)} ms")
    # Each connection kept counting for its own service port and pod through the five reloads:
    # a request and its answer are at least two packets through the gateway.
    eps = json.loads(subprocess.run([ctl_bin, "--socket", sock, "endpoints", "--json"], capture_output=True,
                                    text=True, timeout=30).stdout or "[]")
    counted = {e["endpoint"]: e["packets"] for e in eps if e["service"] == "default/test-svc:http"}
    want = {}
    for res in results:
        if res["pods"]:
            key = f"{POD_IP[res['pods'][0]]}:80"
            want[key] = want.get(key, 0) + 2 * res["requests"]
    check(want and all(counted.get(k, 0) >= n for k, n in want.items()),
          f"the connections' packets after the reloads count for their own pods: counted {counted}, at least {want}")
    rt1 = {ns: retrans(ns) for ns in TCP_NS}
    check(rt1 == rt0, f"no TCP segment retransmitted by the clients or the pods: no packet lost ({rt0} -> {rt1})")
    # After the broken config, reload 4's config is serving: the removed endpoint gets no new
    # connection, and the extra Service's address is an unallocated service-CIDR address now.
    seen = {curl("client", "http://192.168.67.8:30001/") for _ in range(20)}
    check(None not in seen and victim not in seen, f"new connections avoid the removed {victim}: {sorted(seen)}")
    check(curl("lab-sleeper", "http://10.96.100.9/") is None, "the removed Service no longer answers")
    checks.accounting(ctl_bin, sock, "after five reloads under traffic", mbufs)
finally:
    for c in clients:
        if c.poll() is None:
            c.kill()
    r = lab("lab_stop_gateway; cat $LAB_RUN/svcgate.log; lab_down")
    if checks.failures:
        print("svcgate's log:\n" + r.stdout[-3000:])
    os.unlink(tmp.name)
    if os.path.exists(stop_clients):
        os.unlink(stop_clients)

checks.finish("reload under traffic")
