#!/usr/bin/python3
"""client_ip preserve end to end on the lab (docs/client-ip.md): the nodes route the client LAN
through the gateway (their default route), so a NodePort under policy Cluster can DNAT only and
the pod sees the client's own address. Both families. Prints "ok   ..." / "FAIL ..." per check;
exits 1 on a failure.

usage: client_ip_e2e.py SVCGATE SOURCE_DIR
The lab's Services (config/lab.yaml, no client_ip: masquerade, kube-proxy's way) and two more as
Kubernetes objects: client-ip-svc annotated svcgate.io/client-ip: preserve (NodePort 30011) and
client-ip-masq annotated masquerade (NodePort 30012), each over the three test pods.
"""
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
ns = checks.ns
PODS = {"test-pod-1": "10.244.2.4", "test-pod-2": "10.244.2.6", "test-pod-3": "10.244.3.6"}
FAMILIES = [
    dict(tag="", client="192.168.67.100", gateway="10.192.0.2", nodeport="192.168.67.8",
         pod=lambda p: PODS[p], blackhole=["ip", "route"], host="/32"),
    dict(tag="IPv6 ", client="fd00:67::100", gateway="fd00:192::2", nodeport="[fd00:67::8]",
         pod=lambda p: "fd00:244:" + PODS[p].split(".")[2] + "::" + PODS[p].split(".")[3],
         blackhole=["ip", "-6", "route"], host="/128"),
]


def lab(script):
    return checks.lab(src, script)


def service(name, node_port, annotation):
    """A dual-stack NodePort Service over the three test pods, annotated svcgate.io/client-ip."""
    n = {"client-ip-svc": 11, "client-ip-masq": 12}[name]
    objs = [{"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": name, "namespace": "default", "annotations": {"svcgate.io/client-ip": annotation}},
             "spec": {"type": "NodePort", "clusterIP": f"10.96.110.{n}", "clusterIPs": [f"10.96.110.{n}", f"fd00:96::b:{n}"],
                      "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80, "nodePort": node_port}]}}]
    for fam, addrs in (("IPv4", list(PODS.values())), ("IPv6", [FAMILIES[1]["pod"](p) for p in PODS])):
        objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": fam,
                     "metadata": {"name": f"{name}-{fam}", "namespace": "default",
                                  "labels": {"kubernetes.io/service-name": name}},
                     "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addrs],
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]})
    return objs


def peers(where, url, n):
    """n new connections (Connection: close, one curl): [(pod, address it saw)], None per failure."""
    r = ns(where, "curl", "-s", "-m", "10", "-H", "Connection: close", *[url] * n, timeout=120)
    out = []
    for line in r.stdout.decode(errors="replace").splitlines():
        pod, _, addr = line.partition(" ")
        out.append((pod, addr.removeprefix("::ffff:")))
    return out


def ctl(*args):
    return subprocess.run([ctl_bin, "--socket", sock, *args], capture_output=True, text=True, timeout=30)


def reload_with(**cluster):
    cfg["cluster"].update(cluster)
    with open(tmp.name, "w") as f:
        yaml.safe_dump(cfg, f)
    r = ctl("reload")
    return r.returncode == 0


if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False  # reloads are this test's, by svcgatectl
manifest = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-client-ip-", delete=False)
yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                "items": service("client-ip-svc", 30011, "preserve") + service("client-ip-masq", 30012, "masquerade")},
               manifest)
manifest.close()
cfg["kubernetes"] = {"manifests": [manifest.name]}
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-e2e-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")

try:
    r = lab(f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, f"lab up, svcgate running in namespace gw ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)

    for f in FAMILIES:
        tag, np = f["tag"], f["nodeport"]
        # The annotated Service: 60 new connections spread over all three pods, each of which saw
        # the client's own address.
        seen = peers("client", f"http://{np}:30011/peer", 60)
        pods = {p for p, _ in seen}
        addrs = {a for _, a in seen}
        check(len(seen) == 60 and pods == set(PODS) and addrs == {f["client"]},
              f"{tag}preserve: 60 connections to NodePort 30011 reach {sorted(pods)}, which saw {sorted(addrs)}")
        # The lab's own Service (no annotation, cluster.client_ip masquerade) and the one annotated
        # masquerade: the pods see the gateway's cluster-side address, as with kube-proxy.
        for port in (30001, 30012):
            seen = peers("client", f"http://{np}:{port}/peer", 12)
            addrs = {a for _, a in seen}
            check(len(seen) == 12 and addrs == {f["gateway"]},
                  f"{tag}masquerade: 12 connections to NodePort {port}, the pods saw {sorted(addrs)}")
        # From a pod to the preserving NodePort: to itself it is hairpin, to its node's other pod
        # one-armed (both masqueraded: the reply must cross the gateway), to the other node's pod
        # its own address is kept.
        seen = peers("test-pod-1", f"http://{np}:30011/peer", 30)
        want = {p: (f["pod"]("test-pod-1") if p == "test-pod-3" else f["gateway"]) for p in PODS}
        wrong = [(p, a) for p, a in seen if want.get(p) != a]
        check(len(seen) == 30 and "test-pod-1" in {p for p, _ in seen} and not wrong,
              f"{tag}from test-pod-1: hairpin and one-armed masqueraded, test-pod-3 saw test-pod-1 "
              f"({len(seen)} answers, {sum(p == 'test-pod-1' for p, _ in seen)} hairpin, wrong: {wrong})")

    r = ctl("endpoints", "--json")
    rows = json.loads(r.stdout) if r.returncode == 0 else []
    src_of = {}
    for e in rows:
        src_of.setdefault(e["service"], set()).add(e.get("external_source"))
    check(src_of.get("default/client-ip-svc:http") == {"preserve"} and
          src_of.get("default/test-svc:http") == {"masquerade"} and src_of.get("kube-system/kube-dns:dns") == {None},
          f"svcgatectl endpoints: each port's external source ({src_of.get('default/client-ip-svc:http')}, "
          f"{src_of.get('default/test-svc:http')})")

    # The whole gateway preserves: the lab's own Service now keeps the client, the one annotated
    # masquerade still masquerades.
    check(reload_with(client_ip="preserve"), "reload with cluster.client_ip: preserve")
    for f in FAMILIES:
        for port, want in ((30001, f["client"]), (30012, f["gateway"])):
            seen = peers("client", f"http://{f['nodeport']}:{port}/peer", 12)
            addrs = {a for _, a in seen}
            check(len(seen) == 12 and addrs == {want},
                  f"{f['tag']}cluster.client_ip preserve: NodePort {port}, the pods saw {sorted(addrs)}")
    # masquerade_all masquerades everything, preserved Services too.
    check(reload_with(masquerade_all=True), "reload with masquerade_all: true")
    for f in FAMILIES:
        seen = peers("client", f"http://{f['nodeport']}:30011/peer", 12)
        addrs = {a for _, a in seen}
        check(len(seen) == 12 and addrs == {f["gateway"]},
              f"{f['tag']}masquerade_all: NodePort 30011, the pods saw {sorted(addrs)}")
    check(reload_with(masquerade_all=False, client_ip="masquerade"), "reload back to the lab's config")

    # The way back removed: both nodes drop what they would send to the client. The client's SYNs
    # go unanswered and are resent; the gateway counts them under the Service and warns once.
    for f in FAMILIES:
        for node in ("kube-node-1", "kube-node-2"):
            ns(node, *f["blackhole"], "add", "blackhole", f["client"] + f["host"])
        r = ns("client", "curl", "-s", "-m", "4", f"http://{f['nodeport']}:30011/peer", timeout=20)
        check(r.returncode != 0, f"{f['tag']}no route back: the connection to NodePort 30011 does not complete")
        for node in ("kube-node-1", "kube-node-2"):
            ns(node, *f["blackhole"], "del", "blackhole", f["client"] + f["host"])
    time.sleep(1.5)  # the control loop's once-a-second pass writes the warning
    text = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5", f"http://{cfg['control']['metrics']}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    counts = {}
    for line in text.splitlines():
        if line.startswith("svcgate_client_ip_no_return_total{"):
            labels, _, value = line.rpartition(" ")
            counts[("IPv6" if 'family="IPv6"' in labels else "IPv4",
                    "client-ip-svc" if "client-ip-svc" in labels else labels)] = float(value)
    check(counts.get(("IPv4", "client-ip-svc"), 0) >= 1 and counts.get(("IPv6", "client-ip-svc"), 0) >= 1,
          f"svcgate_client_ip_no_return_total counts the resent SYNs per family ({counts})")
    log = lab("cat $LAB_RUN/svcgate.log").stdout
    warned = [l for l in log.splitlines() if "default/client-ip-svc:http" in l and "resent its SYN" in l]
    check(len(warned) == 2, f"the log warns once per service port (IPv4, IPv6): {len(warned)} lines")
    r = ctl("status")
    check(r.returncode == 0 and "NO RETURN: default/client-ip-svc:http (IPv6)" in r.stdout,
          "svcgatectl status shows the service port without a way back")
    seen = peers("client", "http://192.168.67.8:30011/peer", 3)
    check(len(seen) == 3 and {a for _, a in seen} == {"192.168.67.100"}, f"the route back restored: served again ({seen})")
finally:
    checks.lab_end(src, tmp.name, manifest.name)

checks.finish("client_ip end to end")
