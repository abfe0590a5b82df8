#!/usr/bin/python3
"""Active health checks end to end (a Service's health_check, docs/health-checks.md), both
families, in the lab of tools/lib/lab.sh: the cluster port gets a host interface (sg-cl), through
which the gateway's kernel sends the probes. Prints "ok   ..." / "FAIL ..." per check; exits 1 on a
failure.

usage: health_e2e.py SVCGATE SOURCE_DIR

Checked: test-svc (NodePort 30001, three pods) with http checks every 500 ms (timeout 300, rise 2,
fall 3): a pod failing /healthz (503) is out within fall x interval + timeout, 60 requests of each
family never reach it, a keep-alive connection opened on it before keeps working; back within
rise x interval, 60 requests reach all three. A pod's server killed (refused) and started again;
a node the gateway no longer reaches (a blackhole route on the node: timeout). tcp and udp checks
against an open and a closed port. on_failure: reset ends the open connection; every pod failing
is REJECT, and all_down: panic spreads over them all. A client whose source port is in the probes'
range (512-1023) is served as usual, and no probe makes a flow. Metrics, the log line per
transition, /healthz's body. Then the gateway follows the tests' API server
(tests/support/kube_apiserver.py in namespace gw), test-svc's checks in its annotation
svcgate.io/health-check: kube-node-2 cut off while its EndpointSlice says ready takes test-pod-3
out the same way.
"""
import json
import os
import re
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
ns = checks.ns
INTERVAL, TIMEOUT, RISE, FALL = 0.5, 0.3, 2, 3
# What a transition may take beyond its checks: the publish, and this test's 50 ms polling.
SLACK = 0.7

if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False
cfg["dataplane"]["ports"][1]["host_interface"] = "sg-cl"  # the probes' way: the kernel behind the cluster port
web = next(s for s in cfg["services"] if s["name"] == "default/test-svc")
web["health_check"] = {"type": "http", "path": "/healthz", "interval_ms": int(INTERVAL * 1000),
                       "timeout_ms": int(TIMEOUT * 1000), "rise": RISE, "fall": FALL}
POD3 = ["10.244.3.6", "fd00:244:3::6"]
for name, proto, target, check_spec in (
        ("tcp-open", "TCP", 80, {"type": "tcp"}), ("tcp-closed", "TCP", 81, {"type": "tcp"}),
        ("udp-open", "UDP", 80, {"type": "udp", "expect_reply": True}), ("udp-closed", "UDP", 81, {"type": "udp"})):
    i = len(cfg["services"])
    cfg["services"].append({"name": f"default/{name}", "cluster_ips": [f"10.96.50.{i}", f"fd00:96::50:{i}"],
                            "ports": [{"name": "p", "protocol": proto, "port": 80, "target_port": target}],
                            "health_check": dict(check_spec, interval_ms=500, timeout_ms=300, rise=2, fall=2),
                            "endpoints": POD3})
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-health-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")
PODS = {"test-pod-1": ("10.244.2.4", "fd00:244:2::4"), "test-pod-2": ("10.244.2.6", "fd00:244:2::6"),
        "test-pod-3": ("10.244.3.6", "fd00:244:3::6")}


def health():
    """(service, endpoint address) -> the endpoints row, for every row with a health verdict."""
    r = subprocess.run([ctl_bin, "--socket", sock, "endpoints", "--json"], capture_output=True, text=True, timeout=30)
    rows = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
    out = {}
    for x in rows:
        if x.get("health") is None:
            continue
        addr = x["endpoint"].rsplit(":", 1)[0].strip("[]")
        out[(x["service"].rsplit(":", 1)[0], addr)] = x
    return out


def states(service, addrs):
    h = health()
    return [h.get((service, a), {}).get("health") for a in addrs]


def wait_state(service, addrs, want, limit):
    """Seconds until every address of `service` is `want`, or None after `limit`."""
    return checks.wait(lambda: states(service, addrs) == [want] * len(addrs), limit)


def pods_reached(url, n, flag):
    """n connections (Connection: close) from the client: the pods that answered, as a list."""
    r = ns("client", "curl", flag, "-s", "-m", "5", "-H", "Connection: close", *[url] * n, timeout=120)
    return [l for l in r.stdout.decode(errors="replace").splitlines() if l.startswith("test-pod-")]


URL4, URL6 = "http://192.168.67.8:30001/", "http://[fd00:67::8]:30001/"

# Keep-alive connections held by one process in the client's namespace: "open POD FAMILY" opens
# connections until one is answered by POD and keeps it; "ask K" asks on the K-th kept one.
HOLDER = r"""
import http.client, sys
kept = []
for line in sys.stdin:
    cmd = line.split()
    try:
        if cmd[0] == "open":
            host = "192.168.67.8" if cmd[2] == "4" else "fd00:67::8"
            for _ in range(60):
                c = http.client.HTTPConnection(host, 30001, timeout=3)
                c.request("GET", "/")
                body = c.getresponse().read().decode().strip()
                if body == cmd[1]:
                    kept.append(c)
                    break
                c.close()
            print(len(kept) - 1, flush=True)
        elif cmd[0] == "ask":
            c = kept[int(cmd[1])]
            c.request("GET", "/")
            print(c.getresponse().read().decode().strip(), flush=True)
    except Exception as e:
        print(type(e).__name__, flush=True)
"""


class Holder:
    def __init__(self):
        self.p = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3", "-c", HOLDER],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def pod_signal(pod, sig):
    """SIGUSR1: its /healthz answers 503; SIGUSR2: 200 again (tools/lib/podserver.py)."""
    checks.lab(src, f"kill -{sig} $(cat $LAB_RUN/{pod}.pid)")


def metrics():
    return subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5",
                           f"http://{cfg['control']['metrics']}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout


def cut_off_node2(cut):
    """A blackhole route on kube-node-2 towards the gateway's cluster addresses (or none again):
    the node and its pods can no longer answer it."""
    op = "add" if cut else "del"
    checks.lab(src, f"lab_x kube-node-2 ip route {op} blackhole 10.192.0.2/32; "
               f"lab_x kube-node-2 ip -6 route {op} blackhole fd00:192::2/128")


def sick_phase(pod, holder):
    """pod fails /healthz: out within fall x interval + timeout; its kept connections go on; back."""
    addrs = PODS[pod]
    k4, k6 = holder.say(f"open {pod} 4"), holder.say(f"open {pod} 6")
    check(k4 != "-1" and k6 != "-1", f"keep-alive connections open on {pod}, one per family ({k4}, {k6})")
    pod_signal(pod, "USR1")
    took = wait_state("default/test-svc", addrs, "down", FALL * INTERVAL + TIMEOUT + SLACK + 2)
    bound = FALL * INTERVAL + TIMEOUT + SLACK
    check(took is not None and took <= bound,
          f"{pod} failing /healthz (503): down in both families after {took if took is None else round(took, 2)} s "
          f"(fall x interval + timeout = {FALL * INTERVAL + TIMEOUT:.1f} s, +{SLACK} s to publish and see it)")
    row = health().get(("default/test-svc", addrs[0]), {})
    check(row.get("last_failure") == "status 503", f"its last failure: {row.get('last_failure')!r}")
    for url, flag in ((URL4, "-4"), (URL6, "-6")):
        got = pods_reached(url, 60, flag)
        check(len(got) == 60 and pod not in got and len(set(got)) == 2,
              f"60 new connections to {url}: {len(got)} served, by {sorted(set(got))}, none by {pod}")
    a4, a6 = holder.say(f"ask {k4}"), holder.say(f"ask {k6}")
    check(a4 == pod and a6 == pod, f"the connections opened on {pod} before keep working ({a4}, {a6})")
    pod_signal(pod, "USR2")
    took = wait_state("default/test-svc", addrs, "up", RISE * INTERVAL + SLACK + 2)
    check(took is not None and took <= RISE * INTERVAL + SLACK,
          f"{pod} healthy again: up after {took if took is None else round(took, 2)} s "
          f"(rise x interval = {RISE * INTERVAL:.1f} s, +{SLACK} s)")
    for url, flag in ((URL4, "-4"), (URL6, "-6")):
        got = pods_reached(url, 60, flag)
        check(len(got) == 60 and set(got) == set(PODS), f"60 connections to {url} reach all three: {sorted(set(got))}")


api, api_dir = None, tempfile.mkdtemp(prefix="svcgate-health-api-")
try:
    r = checks.lab(src, f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, f"lab up, svcgate running with health checks ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)

    # tcp and udp checks against an open and a closed port, both families.
    for svc, want, failure in (("tcp-open", "up", ""), ("tcp-closed", "down", "refused"),
                               ("udp-open", "up", ""), ("udp-closed", "down", "refused")):
        took = wait_state(f"default/{svc}", POD3, want, 10)
        rows = [health().get((f"default/{svc}", a), {}) for a in POD3]
        check(took is not None and all(x.get("last_failure", "") == failure for x in rows),
              f"{svc}: {want} in both families after {took} s (last failure {[x.get('last_failure') for x in rows]})")
    m = metrics()
    oks = re.search(r'^svcgate_health_checks_total\{result="ok"\} (\d+)', m, re.M)
    check(oks and int(oks.group(1)) >= 12,
          f"svcgate_health_checks_total ok: {oks.group(1) if oks else None} (test-svc's 6 and tcp/udp-open's 4 pass)")

    check(states("default/test-svc", [a for p in PODS.values() for a in p]) == ["up"] * 6,
          "test-svc: its six endpoints up")
    holder = Holder()
    sick_phase("test-pod-2", holder)

    # A pod's server stopped: refused; started again: back.
    checks.lab(src, "kill $(cat $LAB_RUN/test-pod-1.pid)")
    took = wait_state("default/test-svc", PODS["test-pod-1"], "down", 6)
    row = health().get(("default/test-svc", PODS["test-pod-1"][0]), {})
    check(took is not None and row.get("last_failure") == "refused",
          f"test-pod-1's server stopped: down after {took} s, last failure {row.get('last_failure')!r}")
    got = pods_reached(URL4, 60, "-4")
    check(len(got) == 60 and "test-pod-1" not in got, f"60 connections while it is down: {len(got)} served, none by it")
    checks.lab(src, "ip netns exec test-pod-1 /usr/bin/python3 $LAB_SRC/tools/lib/podserver.py test-pod-1 "
               "10.244.2.4,fd00:244:2::4 80 >>$LAB_RUN/test-pod-1.log 2>&1 & echo $! >$LAB_RUN/test-pod-1.pid")
    took = wait_state("default/test-svc", PODS["test-pod-1"], "up", 6)
    check(took is not None, f"test-pod-1's server started again: up after {took} s")

    # A node the gateway no longer reaches, its pods still "ready" in the config: timeouts.
    cut_off_node2(True)
    took = wait_state("default/test-svc", PODS["test-pod-3"], "down", 8)
    row = health().get(("default/test-svc", PODS["test-pod-3"][0]), {})
    check(took is not None and row.get("last_failure") == "timeout",
          f"kube-node-2 cut off by a blackhole route: test-pod-3 down after {took} s, last failure "
          f"{row.get('last_failure')!r}")
    got = pods_reached(URL4, 60, "-4")
    check(len(got) == 60 and "test-pod-3" not in got, f"60 connections meanwhile: {len(got)} served, none by test-pod-3")
    cut_off_node2(False)
    took = wait_state("default/test-svc", PODS["test-pod-3"], "up", 8)
    check(took is not None, f"the route gone: test-pod-3 up again after {took} s")

    # A client in the probes' source port range is translated as usual; no probe made a flow.
    r = ns("client", "curl", "-4", "-s", "-m", "5", "--local-port", "600", URL4)
    check(r.returncode == 0 and r.stdout.decode().startswith("test-pod-"),
          f"a client connecting from port 600 (the probes' range) is served: {r.stdout.decode().strip()!r}")
    fl = subprocess.run([ctl_bin, "--socket", sock, "flows", "--json", "--limit", "100000"], capture_output=True,
                        text=True, timeout=30)
    flows = json.loads(fl.stdout) if fl.returncode == 0 and fl.stdout.strip() else None
    probe_flows = [f for f in flows or [] if re.match(r"^\[?(10\.192\.0\.2|fd00:192::2)\b", f.get("original", ""))]
    check(flows is not None and not probe_flows, f"no flow from the probes' address ({len(flows or [])} flows)")

    # on_failure: reset: the connection open on a failing pod ends.
    web["health_check"]["on_failure"] = "reset"
    check(checks.publish(src, cfg, tmp.name), "reload with on_failure: reset")
    k4 = holder.say("open test-pod-2 4")
    pod_signal("test-pod-2", "USR1")
    took = wait_state("default/test-svc", PODS["test-pod-2"], "down", 6)
    time.sleep(0.3)
    a4 = holder.say(f"ask {k4}")
    check(took is not None and a4 in ("ConnectionResetError", "RemoteDisconnected", "BrokenPipeError"),
          f"on_failure reset: the connection on test-pod-2 ends when it goes down ({a4})")
    pod_signal("test-pod-2", "USR2")
    check(wait_state("default/test-svc", PODS["test-pod-2"], "up", 6) is not None, "test-pod-2 up again")
    holder.close()

    # Every pod failing: REJECT at once (as with no endpoints); all_down: panic serves them all.
    for pod in PODS:
        pod_signal(pod, "USR1")
    every = [a for p in PODS.values() for a in p]
    took = wait_state("default/test-svc", every, "down", 6)
    t0 = time.monotonic()
    r = ns("client", "curl", "-4", "-s", "-m", "5", URL4)
    check(took is not None and r.returncode == 7 and time.monotonic() - t0 < 2,
          f"every pod failing: a new connection is refused at once (curl {r.returncode})")
    hz = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5", "-w", " %{http_code}",
                         f"http://{cfg['control']['metrics']}/healthz"], capture_output=True, text=True, timeout=30)
    check(hz.stdout.endswith(" 200") and '"endpointsDown":' in hz.stdout,
          f"/healthz stays 200 and counts the endpoints down: {hz.stdout.strip()[-120:]}")
    web["health_check"]["all_down"] = "panic"
    check(checks.publish(src, cfg, tmp.name), "reload with all_down: panic")
    got = pods_reached(URL4, 60, "-4")
    check(len(got) == 60 and set(got) == set(PODS), f"panic: 60 connections spread over all three: {sorted(set(got))}")
    for pod in PODS:
        pod_signal(pod, "USR2")
    check(wait_state("default/test-svc", every, "up", 6) is not None, "every pod up again")

    m = metrics()
    ups = re.findall(r'^svcgate_endpoint_health_up\{service="default/test-svc",endpoint="[^"]+"\} 1$', m, re.M)
    trans = {k: int(v) for k, v in re.findall(r'^svcgate_health_transitions_total\{to="(\w+)"\} (\d+)', m, re.M)}
    logged = checks.log_count(src, "health check: ")
    check(len(ups) == 6 and trans.get("down", 0) >= 10 and trans.get("up", 0) >= 6 and
          logged == trans.get("down", 0) + trans.get("up", 0),
          f"metrics: 6 test-svc endpoints up, transitions {trans}; {logged} log lines, one per transition")
    check("svcgate_health_check_seconds_count" in m, "svcgate_health_check_seconds: the checks' latency histogram")
    r = subprocess.run([ctl_bin, "--socket", sock, "endpoints"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and "HEALTH" in r.stdout and re.search(r"10\.244\.3\.6:81 .* down \d+s \(refused\)", r.stdout),
          "svcgatectl endpoints shows HEALTH, down for how long and why")

    # The same gateway following the tests' API server: test-svc's checks in its annotation, its
    # EndpointSlices saying every pod is ready while the gateway cannot reach kube-node-2.
    checks.lab(src, "lab_stop_gateway")
    with open(os.path.join(src, "config", "k8s-objects.yaml")) as f:
        objects = yaml.safe_load(f)
    for o in objects["items"]:
        if o["kind"] == "Service" and o["metadata"]["name"] == "test-svc":
            o["metadata"].setdefault("annotations", {})["svcgate.io/health-check"] = \
                f"http:/healthz interval_ms={int(INTERVAL * 1000)} timeout_ms={int(TIMEOUT * 1000)} rise={RISE} fall={FALL}"
    with open(f"{api_dir}/objects.yaml", "w") as f:
        yaml.safe_dump(objects, f)
    api = subprocess.Popen(["ip", "netns", "exec", "gw", "/usr/bin/python3",
                            os.path.join(src, "tests", "support", "kube_apiserver.py"), api_dir,
                            f"{api_dir}/objects.yaml"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    check("serving" in api.stdout.readline(), "the tests' API server serves in namespace gw")
    with open(os.path.join(src, "config", "kube-api.yaml")) as f:
        kcfg = yaml.safe_load(f)
    kcfg["kubernetes"]["api"]["kubeconfig"] = f"{api_dir}/kubeconfig"
    kcfg["control"]["watch"] = False
    kcfg["dataplane"]["ports"][1]["host_interface"] = "sg-cl"
    with open(f"{api_dir}/svcgate.yaml", "w") as f:
        yaml.safe_dump(kcfg, f)
    r = checks.lab(src, f"lab_start_gateway {svcgate} {api_dir}/svcgate.yaml")
    check(r.returncode == 0, "svcgate follows the API server, test-svc annotated with svcgate.io/health-check")
    every = [a for p in PODS.values() for a in p]
    check(wait_state("default/test-svc", every, "up", 20) is not None and
          health()[("default/test-svc", "10.244.2.4")].get("health_check", "").startswith("http GET /healthz"),
          "API mode: test-svc's six endpoints checked by the annotation's check")
    cut_off_node2(True)
    took = wait_state("default/test-svc", PODS["test-pod-3"], "down", 8)
    check(took is not None and took <= FALL * INTERVAL + TIMEOUT + SLACK,
          f"API mode, kube-node-2 cut off while its slice says ready: test-pod-3 down after {took} s")
    rows = [x for x in json.loads(subprocess.run([ctl_bin, "--socket", sock, "endpoints", "--json"],
                                                 capture_output=True, text=True, timeout=30).stdout or "[]")
            if x["endpoint"].startswith("10.244.3.6:")]
    check(rows and "unhealthy" in rows[0]["conditions"],
          f"its conditions: {rows[0]['conditions'] if rows else None} (ready in the slice, unhealthy here)")
    for url, flag in ((URL4, "-4"), (URL6, "-6")):
        got = pods_reached(url, 60, flag)
        check(len(got) == 60 and "test-pod-3" not in got,
              f"API mode: 60 connections to {url}: {len(got)} served, by {sorted(set(got))}")
    cut_off_node2(False)
    check(wait_state("default/test-svc", PODS["test-pod-3"], "up", 8) is not None, "API mode: test-pod-3 up again")
finally:
    if api:
        api.kill()
        api.wait(timeout=10)
    checks.lab_end(src, tmp.name)
    shutil.rmtree(api_dir, ignore_errors=True)

checks.finish("health checks end to end")
