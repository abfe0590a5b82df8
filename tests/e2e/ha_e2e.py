#!/usr/bin/python3
"""End to end on the HA lab (docs/ha.md, tools/lib/ha.sh) with 3 gateways: svcgate and
BIRD on each, BIRD on the router, ECMP over the gateways. Prints "ok   ..." / "FAIL ..." per check;
exits 1 on a failure.

usage: ha_e2e.py SVCGATE SOURCE_DIR
  - what each gateway announces is in the router's routing table, checked route by route;
  - 300 new connections from the client to a LoadBalancer IP: all answered, each gateway >= 15%;
  - /healthz, /livez and a healthCheckNodePort answer 200, and 503 when they should;
  - a UDP flood to a gateway's own address: punt drops counted, its BGP sessions stay up;
  - SIGKILL of a gateway carrying keep-alive connections: the router's ECMP set shrinks (BFD),
    new connections succeed again within 3 s, the survivors' keep-alive connections see no error,
    the killed gateway's share is reported; it restarts and rejoins;
  - svcgatectl drain on a gateway carrying keep-alive connections: none breaks, its announcements
    are withdrawn, it exits by itself once they close;
  - the cluster's load balancer (the gateways also follow the tests' API server in the router's
    namespace, HA_KUBE): a LoadBalancer Service created with kubectl gets an address from the pool,
    is announced by every gateway over BGP and answered within 3 s of its creation; deleted, it is
    withdrawn.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
ns = checks.ns
# Issue 18's lab: no flow replication (tests/e2e/sync_e2e.py has it), the router pins connections.
lab = checks.HaLab(src, ctl, sync=False, kube=True)
N, RUN, LB4, LB6, LOCAL4, EXT4, EXT6 = lab.N, lab.RUN, lab.LB4, lab.LB6, lab.LOCAL4, lab.EXT4, lab.EXT6
ha, gwctl, gwjson, hops = lab.sh, lab.gwctl, lab.gwjson, lab.hops


wait = checks.wait


def http(ns_name, url, timeout="2"):
    r = ns(ns_name, "curl", "-s", "-m", timeout, "-o", "/dev/stdout", "-w", " %{http_code}", url, timeout=30)
    return r.stdout.decode(errors="replace").rsplit(" ", 1) if r.returncode == 0 else None


def flows_by_port(i):
    """The client source ports of every flow gateway i carries (its own, not replicas)."""
    out = gwctl(i, "flows", "--json", "--limit", "10000")
    try:
        return {int(f["original"].split(" > ")[0].rsplit(":", 1)[1]) for f in json.loads(out)
                if ("192.168.66.100" in f["original"] or "fd00:66::100" in f["original"]) and not f.get("replica_of")}
    except (ValueError, KeyError, IndexError):
        return set()


def KeepAlive(n, addr=LB4):
    """n keep-alive connections from the client, answering before this returns (or after 20 s)."""
    k = checks.KeepAlive(src, "client", addr, n)
    k.wait_ready(20)
    return k


def owners(conns):
    """Connection port -> gateway index."""
    where = {}
    for i in range(1, N + 1):
        for port in flows_by_port(i):
            where[port] = i
    return {c["port"]: where.get(c["port"]) for c in conns}




def api_load_balancer():
    """A LoadBalancer Service created through the API: addressed by the Lease holder, announced by
    every gateway, answered within 3 s of its creation; deleted: withdrawn."""
    kubectl = ["ip", "netns", "exec", "router", "/usr/bin/kubectl-1.20", "--kubeconfig", f"{RUN}/kube/kubeconfig",
               "--cache-dir", f"{RUN}/kube/cache"]
    roles = [gwjson(i, "status").get("kubernetes", {}).get("load_balancer", {}).get("role") for i in range(1, N + 1)]
    check(sorted(roles) == ["reader"] * (N - 1) + ["writer"], f"one gateway of {N} writes LoadBalancer status: {roles}")
    manifest = os.path.join(src, "config", "lb-service.yaml")
    t0 = time.monotonic()
    r = subprocess.run(kubectl + ["create", "-f", manifest], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"kubectl create: {r.stdout.strip()} {r.stderr.strip()}")

    def external_ip():
        r = subprocess.run(kubectl + ["get", "svc", "demo-lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else ""
    ip = external_ip() if wait(external_ip, 10) is not None else ""
    got = time.monotonic() - t0
    answered = wait(lambda: (lambda a: a is not None and a[1] == "200" and a[0].startswith("test-pod"))(
        http("client", f"http://{ip}/", timeout="1")), 10) if ip else None
    took = time.monotonic() - t0
    check(ip == "192.168.100.64" and answered is not None and took <= 3.0,
          f"a LoadBalancer Service created through the API: {ip or 'no address'} after {got:.1f} s, "
          f"answered through the router {took:.1f} s after its creation")
    check(len(hops(ip)) == N if ip else False, f"every gateway announces it: the router has {hops(ip) if ip else {}}")
    subprocess.run(kubectl + ["delete", "-f", manifest], capture_output=True, timeout=30)
    check(bool(ip) and wait(lambda: not hops(ip), 10) is not None, f"deleted: {ip} withdrawn from the router")


def main():
    r = ha(f"ha_up {N} && ha_start {N}", timeout=180)
    if not check(r.returncode == 0, f"HA lab with {N} gateways up ({r.stderr.strip()[-300:]})"):
        return
    # BGP up and every announcement in the router's table.
    up = wait(lambda: all(len(hops(a)) == N for a in (LB4, LB6, LOCAL4)), 30)
    check(up is not None, f"router: {LB4}, {LB6} and {LOCAL4} each over {N} next hops (after {up} s)")
    for i in range(1, N + 1):
        ann = gwjson(i, "status").get("health", {}).get("announced", [])
        missing = [a for a in ann if (EXT6[i] if ":" in a else EXT4[i]) not in hops(a.split("/")[0])]
        check(len(ann) == 6 and not missing,
              f"gw{i}: every prefix it announces ({len(ann)}) is in the router's table via it (missing {missing})")
    routes = ha("ha_birdc router show route").stdout
    check(routes.count("AS64513i") >= 4 * N, f"birdc on the router shows {routes.count('AS64513i')} routes from the gateways")

    # 300 new connections.
    before = {i: gwjson(i, "stats").get("flows", {}).get("created", 0) for i in range(1, N + 1)}
    answered = 0
    for _ in range(300):
        a = http("client", f"http://{LB4}/")
        answered += a is not None and a[1] == "200" and a[0].startswith("test-pod")
    share = {i: gwjson(i, "stats").get("flows", {}).get("created", 0) - before[i] for i in range(1, N + 1)}
    check(answered == 300, f"300 new connections to {LB4}: {answered} answered")
    check(sum(share.values()) >= 300 and all(v >= 45 for v in share.values()),
          f"each gateway carried at least 15% of them: {share}")

    api_load_balancer()

    # Health.
    for i in range(1, N + 1):
        h = http(f"gw{i}", "http://127.0.0.1:9477/healthz")
        lz = http(f"gw{i}", "http://127.0.0.1:9477/livez")
        check(h is not None and h[1] == "200" and json.loads(h[0]).get("lastUpdated") and lz is not None and
              lz[1] == "200", f"gw{i}: /healthz and /livez 200 with kube-proxy's body ({h}, {lz})")
    hc = http("client", f"http://{EXT4[1]}:32100/")
    check(hc is not None and hc[1] == "200" and json.loads(hc[0]).get("localEndpoints") == 1,
          f"healthCheckNodePort 32100 on gw1's node IP from the client: 200, 1 local endpoint ({hc})")
    hc6 = http("client", f"http://[{EXT6[1]}]:32100/")
    check(hc6 is not None and hc6[1] == "200", f"... and over IPv6 ({hc6})")
    # The local endpoint moves to another node on gw1: 503, and local-lb is withdrawn from gw1 only.
    ha("HA_LOCAL_NODE=kube-node-1 ha_config 1 >/dev/null")
    gwctl(1, "reload")
    hc = http("client", f"http://{EXT4[1]}:32100/")
    check(hc is not None and hc[1] == "503" and json.loads(hc[0]).get("localEndpoints") == 0,
          f"no local endpoint: healthCheckNodePort 503 with 0 local endpoints ({hc})")
    gone = wait(lambda: hops(LOCAL4) == {EXT4[2], EXT4[3]}, 10)
    check(gone is not None, f"policy Local without a local endpoint: {LOCAL4} withdrawn by gw1 only ({hops(LOCAL4)})")
    ha("ha_config 1 >/dev/null")
    gwctl(1, "reload")
    check(wait(lambda: len(hops(LOCAL4)) == N, 10) is not None, f"local endpoint back: {LOCAL4} announced again")

    # The host interface carries the port's addresses and every node IP, following reloads, and
    # takes no router advertisement: a node IP of its own (not a port address) added on gw1 is on
    # sg-ext as a host address and answers the health check port from the client; taken away again.
    def tap_addrs(i):
        return ha(f"ip -n gw{i} -o addr show dev sg-ext").stdout
    a = tap_addrs(1)
    ra = ha("ip netns exec gw1 cat /proc/sys/net/ipv6/conf/sg-ext/accept_ra").stdout.strip()
    check(f"{EXT4[1]}/24" in a and f"{EXT6[1]}/64" in a and "dynamic" not in a and ra == "0",
          f"gw1's sg-ext has its port's addresses, no autoconfigured one, accept_ra {ra}")
    ha(f"ha_config 1 >/dev/null && sed -i \"s|node_ips: \\[|node_ips: [192.168.67.201, 'fd00:67::201', |\" "
       f"$LAB_RUN/gw1.yaml")
    gwctl(1, "reload")
    a = tap_addrs(1)
    hc = http("client", "http://192.168.67.201:32100/")
    hc6 = http("client", "http://[fd00:67::201]:32100/")
    check("192.168.67.201/32" in a and "fd00:67::201/128" in a and hc is not None and hc[1] == "200" and
          hc6 is not None and hc6[1] == "200",
          f"a node IP added by reload: on sg-ext as /32 and /128, health check port answered on it ({hc and hc[1]}, "
          f"{hc6 and hc6[1]})")
    ha("ha_config 1 >/dev/null")
    gwctl(1, "reload")
    a = tap_addrs(1)
    check("192.168.67.201" not in a and "fd00:67::201" not in a and f"{EXT4[1]}/24" in a,
          "... and removed from sg-ext by the reload that takes it away")

    # A flood to gw2's own address from the client: counted punt drops, BGP and BFD stay up. For
    # 6 s and more than 20,000 datagrams, however long a busy host takes to send them (60 s at most).
    since = [line for line in ha("ha_birdc router show protocols").stdout.splitlines() if line.startswith("gw2 ")]
    flood = subprocess.run(["ip", "netns", "exec", "client", "/usr/bin/python3", "-c", f"""
import socket, time, random
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t = time.monotonic(); n = 0
while time.monotonic() - t < 6 or (n <= 20000 and time.monotonic() - t < 60):
    for _ in range(200):
        s.sendto(b'x' * 64, ('{EXT4[2]}', random.randint(1024, 65000))); n += 1
print(n)
"""], capture_output=True, text=True, timeout=120)
    sent = int(flood.stdout.strip() or 0)
    drops = gwjson(2, "stats").get("drops", {}).get("punt_limited", 0)
    after = [line for line in ha("ha_birdc router show protocols").stdout.splitlines() if line.startswith("gw2 ")]
    check(sent > 20000 and drops > 0, f"UDP flood of {sent} datagrams to gw2's address: {drops} counted punt_limited")
    # BIRD prints when the session came up (HH:MM:SS.mmm), derived from its monotonic clock: the
    # same instant can print a few milliseconds apart. A flap would show a time within the flood.
    def up_since(lines):
        m = re.search(r"(\d\d):(\d\d):(\d\d\.\d+)\s+Established", lines[0]) if lines else None
        return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None
    t0, t1 = up_since(since), up_since(after)
    check(t0 is not None and t1 is not None and abs(t1 - t0) < 0.5,
          f"gw2's BGP session stayed up through the flood (before {since}, after {after})")

    # The routing daemon going away never stops the dataplane: gw1's BIRD killed, gw1 leaves the
    # router's table (BFD) and goes on serving its NodePort on its own address.
    ha("kill -9 $(cat $LAB_RUN/gw1-bird.pid)")
    left = wait(lambda: EXT4[1] not in hops(LB4), 5)
    np = http("client", f"http://{EXT4[1]}:30010/")
    h = http("gw1", "http://127.0.0.1:9477/healthz")
    check(left is not None and np is not None and np[1] == "200" and h is not None and h[1] == "200",
          f"gw1's BIRD killed: gw1 left the ECMP set ({left} s), svcgate still serves its NodePort ({np}) and is healthy")
    ha("ha_bird_start gw1")
    check(wait(lambda: len(hops(LB4)) == N, 20) is not None, "gw1's BIRD started again: gw1 back in the ECMP set")

    # SIGKILL of a gateway carrying keep-alive connections.
    ka = KeepAlive(30)
    where = owners(ka.read())
    counts = {i: sum(1 for g in where.values() if g == i) for i in range(1, N + 1)}
    victim = max(counts, key=counts.get)
    check(sum(counts.values()) == 30, f"30 keep-alive connections, per gateway {counts}; killing gw{victim}")
    ha(f"kill -9 $(cat $LAB_RUN/gw{victim}.pid)")
    t0 = time.monotonic()
    shrink = wait(lambda: EXT4[victim] not in hops(LB4), 5, 0.02)
    check(shrink is not None and shrink < 1.5, f"the router's ECMP set lost gw{victim} after {shrink} s (BFD)")
    ok_at = None
    while time.monotonic() - t0 < 10:
        a = http("client", f"http://{LB4}/", "1")
        if a is not None and a[1] == "200":
            ok_at = time.monotonic() - t0
            break
        time.sleep(0.1)
    check(ok_at is not None and ok_at <= 3, f"new connections succeed again {ok_at} s after the kill")
    fresh = sum(1 for _ in range(30) if (a := http("client", f"http://{LB4}/")) and a[1] == "200")
    check(fresh == 30, f"then 30 new connections: {fresh} answered")
    time.sleep(2)
    res = ka.stop()
    survivors = [c for c in res if where.get(c["port"]) != victim]
    broken = [c for c in survivors if c["errors"]]
    lost = [c for c in res if where.get(c["port"]) == victim and c["errors"]]
    check(survivors and not broken, f"keep-alive connections through the survivors: {len(survivors)}, none broke "
                                    f"(longest gap {max((c['gap'] for c in survivors), default=0)} s) {broken[:2]}")
    print(f"info the killed gw{victim} carried {counts[victim]} of 30 keep-alive connections; {len(lost)} broke "
          "(this lab runs without flow replication: HA_SYNC=0; tests/e2e/sync_e2e.py has it)")
    r = ha(f"ha_start_gateway {victim}")
    back = wait(lambda: len(hops(LB4)) == N and len(hops(LB6)) == N, 30)
    check(r.returncode == 0 and back is not None, f"gw{victim} restarted and rejoined the ECMP set after {back} s")

    # Drain and undrain: the announcements go and come back, the gateway runs on.
    u = 1 if victim != 1 else 2
    out = gwctl(u, "drain")
    gone = wait(lambda: EXT4[u] not in hops(LB4), 5)
    out = gwctl(u, "undrain")
    back = wait(lambda: EXT4[u] in hops(LB4) and EXT6[u] in hops(LB6), 5)
    h = http(f"gw{u}", "http://127.0.0.1:9477/healthz")
    time.sleep(4)  # past the least time a drain lasts
    alive = ha(f"kill -0 $(cat $LAB_RUN/gw{u}.pid)").returncode == 0
    st = gwctl(u, "status")
    check(gone is not None and back is not None and h is not None and h[1] == "200" and alive and
          out.startswith("undrained") and "draining" not in st,
          f"drain then undrain on gw{u}: withdrawn after {gone} s, announced again after {back} s ({out.strip()}), "
          f"/healthz {h and h[1]}, still running {alive}")

    # Drain a gateway that carries keep-alive connections.
    ka = KeepAlive(12)
    where = owners(ka.read())
    counts = {i: sum(1 for g in where.values() if g == i) for i in range(1, N + 1)}
    target = max(counts, key=counts.get)
    out = gwctl(target, "drain", "--timeout", "60")
    check("draining" in out, f"svcgatectl drain on gw{target} (carrying {counts[target]} of 12): {out.strip()}")
    gone = wait(lambda: EXT4[target] not in hops(LB4) and EXT6[target] not in hops(LB6), 5)
    check(gone is not None, f"its announcements withdrawn from the router after {gone} s")
    h = http(f"gw{target}", "http://127.0.0.1:9477/healthz")
    check(h is not None and h[1] == "503", f"its /healthz answers 503 while draining ({h})")
    st = gwctl(target, "status")
    check("draining" in st and "connections left" in st, "svcgatectl status shows the drain and the connections left")
    time.sleep(3)  # its connections keep being served meanwhile
    alive = ha(f"kill -0 $(cat $LAB_RUN/gw{target}.pid)").returncode == 0
    check(alive, f"gw{target} still runs while its connections are open")
    # More than 20 answers on each (about 2 s of them), however long a busy host takes for them.
    wait(lambda: all(c["ok"] > 20 or c["errors"] for c in ka.read()), 60)
    res = ka.stop()
    check(all(not c["errors"] and c["ok"] > 20 for c in res),
          f"none of the 12 keep-alive connections broke during the drain ({[c['errors'] for c in res if c['errors']][:2]})")
    exited = wait(lambda: ha(f"kill -0 $(cat $LAB_RUN/gw{target}.pid)").returncode != 0, 30, 0.2)
    log = ha(f"cat $LAB_RUN/gw{target}.log").stdout
    check(exited is not None and "drained: no connection left" in log,
          f"gw{target} exited by itself {exited} s after its connections closed")

    # Drain with no connection: the withdrawal reaches the router before the gateway exits, which
    # it does by itself no sooner than 3 s after the drain began.
    z = next(i for i in range(1, N + 1) if i != target)
    t0 = time.monotonic()
    gwctl(z, "drain")
    withdrawn = exited = None
    while time.monotonic() - t0 < 15 and exited is None:
        now = time.monotonic() - t0
        if withdrawn is None and EXT4[z] not in hops(LB4) and EXT6[z] not in hops(LB6):
            withdrawn = now
        if ha(f"kill -0 $(cat $LAB_RUN/gw{z}.pid)").returncode != 0:
            exited = now
        time.sleep(0.05)
    log = ha(f"cat $LAB_RUN/gw{z}.log").stdout
    check(withdrawn is not None and exited is not None and withdrawn < exited and exited >= 2.9 and
          "drained: no connection left" in log,
          f"gw{z} drained with no connection: withdrawn at the router after {withdrawn} s, exited after {exited} s")


try:
    main()
finally:
    ha("lab_down")
checks.finish("HA lab")
