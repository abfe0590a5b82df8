#!/usr/bin/python3
"""kubernetes.api under live connections, in the lab (issue 34): svcgate in namespace gw follows
the tests' own API server (tests/support/kube_apiserver.py, config/k8s-objects.yaml) on gw's
loopback, with config/kube-api.yaml, while keep-alive connections run through it:

  - the watches cut and the history compacted: both kinds relist (410), the same Services and
    endpoints are published, none twice, and no connection breaks or changes pod;
  - the API server restarted with a new history (versions from 1 again): the gateway reconnects,
    relists and converges, and still no connection breaks;
  - new connections are served throughout.

The test runs itself inside namespace gw (the API server must share svcgate's loopback).
usage: kube_lab_e2e.py SVCGATE SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import checks  # noqa: E402
import kube_apiserver  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
if os.environ.get("SVCGATE_IN_GW") != "1":  # lab up, then the rest inside namespace gw
    r = checks.lab(src, "lab_up && lab_start_apps")
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
        sys.exit(1)
    try:
        rc = subprocess.run(["ip", "netns", "exec", "gw", "/usr/bin/python3", os.path.abspath(__file__), svcgate, src],
                            env=dict(os.environ, SVCGATE_IN_GW="1"), timeout=280).returncode
    finally:
        checks.lab(src, "lab_stop_gateway; lab_down")
    sys.exit(rc)

ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")
sock = "/run/svcgate-lab/svcgate.sock"


def api():
    r = subprocess.run([ctl_bin, "--socket", sock, "status", "--json"], capture_output=True, text=True, timeout=20)
    return ((json.loads(r.stdout) if r.returncode == 0 else {}).get("kubernetes") or {}).get("api") or {}


def published():
    r = subprocess.run([ctl_bin, "--socket", sock, "endpoints", "--json"], capture_output=True, text=True, timeout=20)
    return sorted((e["service"], e["endpoint"]) for e in (json.loads(r.stdout) if r.returncode == 0 else []))


def keepalive(ns, url_host, port, stop):
    return subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", checks.KEEPALIVE, url_host, port,
                             stop, "20"], stdout=subprocess.PIPE, text=True)


def new_connections(n=20):
    answers = [checks.curl("client", "http://192.168.67.8:30001/") for _ in range(n)]
    return sum(1 for a in answers if a and a.startswith("test-pod-"))


with tempfile.TemporaryDirectory() as d:
    srv = kube_apiserver.Server(d, bookmark_seconds=1.0)
    objects = kube_apiserver.load_objects(os.path.join(src, "config", "k8s-objects.yaml"))
    for o in objects:
        srv.put(o)
    kc = srv.kubeconfig(f"{d}/kubeconfig")
    with open(os.path.join(src, "config", "kube-api.yaml")) as f:
        cfg = f.read().replace("/etc/svcgate/kubeconfig", kc)
    cfg_path = f"{d}/svcgate.yaml"
    with open(cfg_path, "w") as f:
        f.write(cfg)
    clients = []
    stop = f"{d}/stop"
    try:
        r = checks.lab(src, f"lab_start_gateway {svcgate} {cfg_path}")
        check(r.returncode == 0, "svcgate follows the API server in namespace gw")
        check(checks.wait(lambda: api().get("synced"), 20) is not None, "the API synced", )
        before = checks.wait(lambda: published() or None, 10) and published()
        check(any(s.startswith("default/test-svc") for s, _ in before), f"test-svc published ({len(before)} endpoints)")
        clients = [keepalive("client", "192.168.67.8", "30001", stop),
                   keepalive("lab-sleeper", "10.107.169.79", "80", stop)]
        first = [c.stdout.readline().strip() for c in clients]
        check(all(p.startswith("test-pod-") for p in first), f"two keep-alive connections answered by {first}")

        # 410: the streams cut, a change, the history compacted before they come back.
        kinds = api().get("kinds", {})
        srv.drop_streams()
        srv.put(next(o for o in objects if o["kind"] == "Service"))  # a new version, same content
        srv.compact()
        relisted = checks.wait(lambda: all(api()["kinds"][k]["relists"] > kinds[k]["relists"]
                                           for k in ("services", "endpointslices")), 20)
        check(relisted is not None, f"410 Gone: both kinds relisted after {relisted} s")
        a = api()
        check(a["kinds"]["services"]["objects"] == sum(1 for o in objects if o["kind"] == "Service"),
              f"after the relist each Service is held once ({a['kinds']['services']['objects']})")
        check(checks.wait(lambda: published() == before, 5) is not None,
              "after the relist the same endpoints are published, none twice")
        check(new_connections() == 20, "new connections served after the relist")

        # The API server restarted with its history gone.
        srv.restart(objects)  # versions from 1 again: older than what the gateway holds
        converged = checks.wait(lambda: all(k["resource_version"] == str(srv.store.rv)
                                            for k in api()["kinds"].values() if k.get("lists")), 30)
        check(converged is not None, f"a restarted API server (new history): followed again after {converged} s")
        check(published() == before, "and the same endpoints are published")
        check(new_connections() == 20, "new connections served after the server's restart")
        time.sleep(1)
        open(stop, "w").close()
        res = [json.loads(c.stdout.readline() or "{}") for c in clients]
        for c in clients:
            c.wait(timeout=30)
        for who, r0, p in zip(("client -> NodePort", "lab-sleeper -> ClusterIP"), res, first):
            check(not r0.get("errors") and r0.get("pods") == [p] and r0.get("requests", 0) > 20 and
                  (r0.get("max_gap") or 9) < 1,
                  f"{who}: {r0.get('requests')} requests on one connection through the relist and the restart, "
                  f"by {p} alone, longest gap {r0.get('max_gap') and round(r0['max_gap'] * 1000)} ms")
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
        if checks.failures:
            print(checks.lab(src, "cat $LAB_RUN/svcgate.log").stdout[-3000:])
        srv.stop()

checks.finish("kubernetes.api under live connections in the lab")
