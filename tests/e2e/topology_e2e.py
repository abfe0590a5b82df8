#!/usr/bin/python3
"""kube-proxy 1.35's semantics end to end, on the lab (issue 35 acceptance).

The gateway is in zone-a (cluster.node_labels); the lab's test pods get zones: test-pod-1 and
test-pod-2 (kube-node-1) zone-a, test-pod-3 (kube-node-2) zone-b. Services come from a manifest as a
cluster prints them (EndpointSlices with hints), reloaded with SIGHUP:

1. default/topo, trafficDistribution PreferSameZone, every endpoint hinted: 100 new connections
   reach only test-pod-1 and test-pod-2. test-pod-3 loses its hints: the next 100 reach all three.
2. default/topo-node, PreferSameNode: test-pod-1 hinted for this gateway's node. A keep-alive
   connection reaches it; then it goes not ready (terminating): new connections fall back to the
   zone hints (test-pod-2 only), and the open connection is still answered by test-pod-1. The
   gateway's zone changed by reload (zone-b) chooses test-pod-3.
3. A known ClusterIP on a port no Service uses is rejected (TCP RST) and an unallocated address of a
   service CIDR dropped, both families, each counted under its reason; a ServiceCIDR object added by
   reload makes its unallocated addresses drops without a restart.

usage: topology_e2e.py SVCGATE SOURCE_DIR
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")
PODS = checks.TEST_PODS
ZONE = {"test-pod-1": "zone-a", "test-pod-2": "zone-a", "test-pod-3": "zone-b"}
NODE = {"test-pod-1": "kube-node-1", "test-pod-2": "kube-node-1", "test-pod-3": "kube-node-2"}
N = 100

# N new connections (one request each) from inside a namespace; prints {pod: count} and failures.
CONNECT = r"""
import collections, http.client, json, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen, failed, errors = collections.Counter(), 0, []
for i in range(n):
    t0 = time.monotonic()
    c = http.client.HTTPConnection(host, port, timeout=2)
    try:
        c.request("GET", "/")
        seen[c.getresponse().read().decode().strip()] += 1
    except Exception as e:
        failed += 1
        errors.append(f"#{i} after {time.monotonic() - t0:.2f} s, port {c.sock.getsockname()[1] if c.sock else '?'}: {e!r}")
    c.close()
print(json.dumps({"pods": seen, "failed": failed, "errors": errors}))
"""

def connect(host, port, n=N):
    r = checks.ns("lab-sleeper", "/usr/bin/python3", "-c", CONNECT, host, str(port), str(n), timeout=120)
    return json.loads(r.stdout or b"{}") if r.returncode == 0 else {"pods": {}, "failed": n}


def endpoint(pod, ready=True, zones=True, nodes=None):
    e = {"addresses": [PODS[pod]], "nodeName": NODE[pod], "zone": ZONE[pod],
         "conditions": {"ready": ready, "serving": True, "terminating": not ready}}
    hints = {}
    if zones:
        hints["forZones"] = [{"name": ZONE[pod]}]
    if nodes:
        hints["forNodes"] = [{"name": nodes}]
    if hints:
        e["hints"] = hints
    return e


def service(name, ip, distribution, endpoints):
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
             "spec": {"clusterIP": ip, "trafficDistribution": distribution, "type": "ClusterIP",
                      "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
             "metadata": {"name": name + "-1", "namespace": "default", "labels": {"kubernetes.io/service-name": name}},
             "ports": [{"name": "http", "port": 80, "protocol": "TCP"}], "endpoints": endpoints}]


def manifest(zone_hints_on_pod3=True, pod1_ready=True, service_cidr=False):
    items = service("topo", "10.96.50.1", "PreferSameZone",
                    [endpoint("test-pod-1"), endpoint("test-pod-2"), endpoint("test-pod-3", zones=zone_hints_on_pod3)])
    # PreferSameNode: the controller hints each endpoint for its node (test-pod-1 for this gateway).
    items += service("topo-node", "10.96.50.2", "PreferSameNode",
                     [endpoint("test-pod-1", ready=pod1_ready, nodes="svcgate"),
                      endpoint("test-pod-2", nodes="kube-node-1"), endpoint("test-pod-3", nodes="kube-node-2")])
    if service_cidr:
        items.append({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                      "spec": {"cidrs": ["10.200.0.0/16"]}})
    return {"apiVersion": "v1", "kind": "List", "items": items}


def reasons(kind):
    st = checks.gateway_stats(ctl_bin, sock)
    return st.get("totals", st).get(kind, {})


def counted(kind, reason, before, least=1):
    """Waits (bounded) until `reason` counted at least `least` more under `kind` than `before`."""
    return checks.wait(lambda: reasons(kind).get(reason, 0) - before >= least, 5) is not None


with open(os.path.join(src, "config", "lab.yaml")) as f:
    base = yaml.safe_load(f)
work = tempfile.mkdtemp(prefix="svcgate-topology-")
cfg_path, mf_path = os.path.join(work, "svcgate.yaml"), os.path.join(work, "cluster.yaml")
stop = os.path.join(work, "stop")
cfg = copy.deepcopy(base)
cfg["cluster"]["node_labels"] = {"topology.kubernetes.io/zone": "zone-a"}
cfg["control"]["watch"] = False  # reloads by SIGHUP only, each one when the test says
cfg.setdefault("kubernetes", {})["manifests"] = [mf_path]
sock = cfg["control"]["socket"]


def publish(**kw):
    with open(mf_path, "w") as f:
        yaml.safe_dump(manifest(**kw), f)
    return checks.publish(src, cfg, cfg_path)


keep = None
try:
    with open(mf_path, "w") as f:
        yaml.safe_dump(manifest(), f)
    with open(cfg_path, "w") as f:
        yaml.safe_dump(cfg, f)
    r = checks.lab(src, f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {cfg_path}")
    check(r.returncode == 0, "lab up, svcgate running in zone-a")
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
        sys.exit(1)

    # 1. Zone hints, then one endpoint without hints.
    got = connect("10.96.50.1", 80)
    check(got["failed"] == 0 and set(got["pods"]) == {"test-pod-1", "test-pod-2"},
          f"PreferSameZone: {N} new connections reach exactly the two zone-a pods: {got}")
    svcs = json.loads(subprocess.run([ctl_bin, "--socket", sock, "services", "--json"], capture_output=True,
                                     text=True, timeout=30).stdout or "[]")
    topo = {s["name"]: s.get("topology") for s in svcs}
    check(topo.get("default/topo:http") == "zone hints" and topo.get("default/topo-node:http") == "node hints",
          f"svcgatectl services says which rule chose: {topo}")
    check(publish(zone_hints_on_pod3=False), "reload: test-pod-3 has no hints")
    got = connect("10.96.50.1", 80)
    check(got["failed"] == 0 and set(got["pods"]) == set(PODS),
          f"an endpoint without hints: {N} new connections reach all three pods: {got}")

    # 2. PreferSameNode: the node's endpoint goes not ready under an open connection.
    keep = subprocess.Popen(["ip", "netns", "exec", "lab-sleeper", "/usr/bin/python3", "-c", checks.KEEPALIVE,
                             "10.96.50.2", "80", stop, "10"], stdout=subprocess.PIPE, text=True)
    first = keep.stdout.readline().strip()
    check(first == "test-pod-1", f"PreferSameNode: a connection reaches the node's own endpoint ({first})")
    got = connect("10.96.50.2", 80, 30)
    check(set(got["pods"]) == {"test-pod-1"}, f"PreferSameNode: new connections only to test-pod-1: {got}")
    check(publish(zone_hints_on_pod3=False, pod1_ready=False), "reload: test-pod-1 terminating (not ready)")
    got = connect("10.96.50.2", 80)
    check(got["failed"] == 0 and set(got["pods"]) == {"test-pod-2"},
          f"node hint gone: new connections fall back to the zone hints (test-pod-2): {got}")
    eps = json.loads(subprocess.run([ctl_bin, "--socket", sock, "endpoints", "--json"], capture_output=True,
                                    text=True, timeout=30).stdout or "[]")
    use = {e["endpoint"]: e.get("internal") for e in eps if e["service"] == "default/topo-node:http"}
    check(use == {"10.244.2.4:80": None, "10.244.2.6:80": "zone hints", "10.244.3.6:80": None},
          f"svcgatectl endpoints says which endpoints are in use and why: {use}")
    time.sleep(0.5)
    open(stop, "w").close()
    res = json.loads(keep.stdout.readline() or "{}")
    keep.wait(timeout=30)
    check(not res.get("errors") and res.get("pods") == ["test-pod-1"] and res.get("requests", 0) > 10,
          f"the open connection is still answered by test-pod-1 after the reload: {res}")

    # The gateway moves to zone-b by reload: it chooses again.
    cfg["cluster"]["node_labels"] = {"topology.kubernetes.io/zone": "zone-b"}
    check(publish(zone_hints_on_pod3=True, pod1_ready=False), "reload: the gateway's zone is now zone-b")
    got = connect("10.96.50.1", 80, 30)
    check(got["failed"] == 0 and set(got["pods"]) == {"test-pod-3"},
          f"after the zone change, new connections reach only the zone-b pod: {got}")

    # 3. Unknown ports and unallocated service addresses, both families.
    rej0, drop0 = reasons("rejects").get("reject_unknown_port", 0), reasons("drops").get("service_cidr_unallocated", 0)
    for host, fam in (("10.107.169.79", "IPv4"), ("[fd00:96::79]", "IPv6")):
        r = checks.ns("lab-sleeper", "curl", "-s", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}",
                      f"http://{host}:81/", timeout=30)
        check(r.returncode == 7, f"{fam}: a ClusterIP on a port no Service uses is refused at once (curl exit {r.returncode})")
    check(counted("rejects", "reject_unknown_port", rej0, 2), "both counted as reject_unknown_port")
    for host, fam in (("10.96.77.77", "IPv4"), ("[fd00:96::7777]", "IPv6")):
        r = checks.ns("lab-sleeper", "curl", "-s", "-m", "1", f"http://{host}/", timeout=30)
        check(r.returncode == 28, f"{fam}: an unallocated service address is dropped (curl timed out: {r.returncode})")
    check(counted("drops", "service_cidr_unallocated", drop0, 2), "both counted as service_cidr_unallocated")
    drop1 = reasons("drops").get("service_cidr_unallocated", 0)
    checks.ns("lab-sleeper", "curl", "-s", "-m", "1", "http://10.200.0.5/", timeout=30)
    check(reasons("drops").get("service_cidr_unallocated", 0) == drop1,
          "10.200.0.5 is no service address before its ServiceCIDR exists")
    check(publish(pod1_ready=False, service_cidr=True), "reload: ServiceCIDR 10.200.0.0/16")
    checks.ns("lab-sleeper", "curl", "-s", "-m", "1", "http://10.200.0.5/", timeout=30)
    check(counted("drops", "service_cidr_unallocated", drop1),
          "after the reload, 10.200.0.5 is an unallocated service address (no restart)")
finally:
    if keep and keep.poll() is None:
        keep.kill()
    if checks.failures:
        print(f"drops: {reasons('drops')}\nrejects: {reasons('rejects')}")
    r = checks.lab(src, "lab_stop_gateway; cat $LAB_RUN/svcgate.log; lab_down")
    if checks.failures:
        print("svcgate's log:\n" + r.stdout[-3000:])
    shutil.rmtree(work, ignore_errors=True)

checks.finish("kube-proxy 1.35 semantics in the lab")
