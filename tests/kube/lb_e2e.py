#!/usr/bin/python3
"""The cluster's load balancer end to end (issue 66): two gateways on net_null ports follow the
tests' API server (tests/support/kube_apiserver.py), each with its own token, so that every write
names its writer:

  - 50 LoadBalancer Services (single-stack, dual-stack, shared, requested, from a named pool, by
    allocate_to) get their addresses within 2 s of their creation at min_sync_period 1 s, each
    status written once, every write by the Lease holder alone; events on them; a Service of
    another class never written to; a MetalLB-assigned status (there before the gateways) taken
    over unchanged; a 409 on a status write decided again, not lost;
  - SIGKILL of the writer: the other takes over within lease_duration + 2.4 retry periods (client-go's
    own bound: a reader sees the last renewal within one jittered retry period and tries again
    within another after the lease), gives a Service created meanwhile its address, and changes
    no other address;
  - both gateways restarted 5 times, in both orders: no address changes, nothing is written;
  - a pool shrunk by reload moves exactly the Services outside it;
  - a delete frees its address for the oldest pending Service; a type change clears the status.

usage: lb_e2e.py SVCGATE"""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import checks  # noqa: E402
import kube_apiserver  # noqa: E402
from kube_gateway import Gateway, check, wait_for  # noqa: E402

svcgate = sys.argv[1]
LEASE, RENEW, RETRY = 6, 4, 1
POOLS = ("[{name: public, addresses: ['10.200.0.0/25', 'fd00:200::/121']},"
         " {name: private, addresses: ['10.201.0.0/29'], auto_assign: false},"
         " {name: team, addresses: ['10.202.0.0/28'], allocate_to: {priority: 5, namespaces: [team-a]}}]")
SHRUNK = POOLS.replace("'10.200.0.0/25'", "'10.200.0.16-10.200.0.127'")


def lb_config(pools):
    return (f"{{election: {{namespace: svcgate-system, name: svcgate-lb, lease_duration_s: {LEASE}, "
            f"renew_deadline_s: {RENEW}, retry_period_s: {RETRY}}}, pools: {pools}}}")


def service(name, i, ns="default", dual=None, ann=None, lb_ip=None, ports=(("TCP", 80),), cls=None, status=None,
            typ="LoadBalancer"):
    spec = {"type": typ, "clusterIP": f"10.97.{i // 250}.{i % 250 + 1}", "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": f"p{n}", "protocol": p, "port": port} for n, (p, port) in enumerate(ports)],
            "selector": {"app": name}}
    spec["clusterIPs"], spec["ipFamilies"] = [spec["clusterIP"]], ["IPv4"]
    if dual:
        spec["ipFamilyPolicy"] = dual
        spec["clusterIPs"].append(f"fd00:96::{i:x}")
        spec["ipFamilies"].append("IPv6")
    if lb_ip:
        spec["loadBalancerIP"] = lb_ip
    if cls:
        spec["loadBalancerClass"] = cls
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}",
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1767225600 + i))}
    if ann:
        meta["annotations"] = ann
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {"loadBalancer": {}}}
    if status:
        obj["status"] = {"loadBalancer": {"ingress": [{"ip": a} for a in status]}}
    return obj


def ingress(srv, key):
    o = srv.get("services", key) or {}
    return [i.get("ip") for i in o.get("status", {}).get("loadBalancer", {}).get("ingress") or []]


def status_writes(srv, key=None, since=0.0):
    return [w for w in srv.writes if w["subresource"] == "status" and w["time"] >= since and
            (key is None or w["key"] == key)]


def main(d):
    srv = kube_apiserver.Server(d, tokens=("gw1-token", "gw2-token", "test-token"))
    # There before the gateways: a status MetalLB wrote, and a Service of another class.
    srv.put(service("from-metallb", 900, ann={"metallb.io/ip-allocated-from-pool": "old"}, status=["10.200.0.100"]))
    srv.put(service("other-class", 901, cls="example.com/other", status=["10.200.0.101"]))
    gws = {}
    for name in ("gw1", "gw2"):
        kc = srv.kubeconfig(f"{d}/{name}.kubeconfig", token=f"{name}-token")
        gws[name] = Gateway(svcgate, d, name, kc, lb=lb_config(POOLS), cluster=f", node_name: {name}",
                            api=" min_sync_period_ms: 1000, watch_timeout_seconds: 30, list_page_size: 100")
    try:
        run(srv, gws, d)
    finally:
        for g in gws.values():
            g.stop()
        if checks.failures:
            for g in gws.values():
                print(f"--- {g.name}'s log\n" + g.log()[-4000:])
        srv.stop()


def lb_status(g):
    return ((g.ctl("status") or {}).get("kubernetes") or {}).get("load_balancer") or {}


def writer(gws):
    for name, g in gws.items():
        if g.p.poll() is None and lb_status(g).get("role") == "writer":
            return name
    return None


def run(srv, gws, d):
    w = wait_for(lambda: writer(gws), 20)
    check(w, "one gateway holds the Lease and writes", {n: lb_status(g) for n, g in gws.items()})
    check(sum(lb_status(g).get("role") == "writer" for g in gws.values()) == 1, "the other reads",
          [lb_status(g).get("role") for g in gws.values()])
    check(wait_for(lambda: ingress(srv, "default/from-metallb") == ["10.200.0.100"] and
                   (srv.get("services", "default/from-metallb")["metadata"].get("annotations") or {})
                   .get("svcgate.io/ip-allocated-from-pool") == "public", 10),
          "a MetalLB-assigned status is taken over unchanged", srv.get("services", "default/from-metallb"))

    # --- 50 Services --------------------------------------------------------------------------
    objs = [service(f"single-{i:02}", i) for i in range(26)]
    objs += [service(f"dual-req-{i}", 30 + i, dual="RequireDualStack") for i in range(4)]
    objs += [service(f"dual-pref-{i}", 34 + i, dual="PreferDualStack") for i in range(4)]
    share = {"svcgate.io/allow-shared-ip": "dns"}
    objs += [service("dns-tcp", 40, ann=share, ports=(("TCP", 53),)),
             service("dns-udp", 41, ann=share, ports=(("UDP", 53),)),
             service("web-a", 42, ann={"metallb.io/allow-shared-ip": "web"}, ports=(("TCP", 80),)),
             service("web-b", 43, ann={"metallb.io/allow-shared-ip": "web"}, ports=(("TCP", 443),))]
    objs += [service("req-ann", 44, ann={"svcgate.io/load-balancer-ips": "10.200.0.90"}),
             service("req-metallb", 45, ann={"metallb.io/loadBalancerIPs": "10.200.0.91,fd00:200::71"},
                     dual="RequireDualStack"),
             service("req-spec", 46, lb_ip="10.200.0.92"),
             service("req-private", 47, ann={"svcgate.io/load-balancer-ips": "10.201.0.7"})]
    objs += [service(f"private-{i}", 48 + i, ann={"svcgate.io/address-pool": "private"}) for i in range(6)]
    objs += [service(f"team-{i}", 54 + i, ns="team-a") for i in range(2)]
    check(len(objs) == 50, "50 LoadBalancer Services", len(objs))
    srv.conflict_next("services", "default/single-05")  # its first status write loses to another writer
    created = {}
    for o in objs:
        created[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = time.monotonic()
        srv.put(o)
    keys = list(created)
    check(wait_for(lambda: all(ingress(srv, k) for k in keys), 20), "every Service gets its addresses",
          [k for k in keys if not ingress(srv, k)])
    late = {}
    for k in keys:
        ok = [x for x in status_writes(srv, k) if x["code"] == 200]
        if ok:
            late[k] = round(ok[0]["time"] - created[k], 2)
    check(len(late) == 50 and max(late.values()) <= 2.0,
          f"each within 2 s of its creation (slowest {max(late.values() or [0])} s)",
          sorted(late.items(), key=lambda kv: -kv[1])[:5])
    time.sleep(2)  # anything written twice would be written by now
    ok_writes = {k: len([x for x in status_writes(srv, k) if x["code"] == 200]) for k in keys}
    check(all(n == 1 for n in ok_writes.values()), "each Service's status is written once",
          {k: n for k, n in ok_writes.items() if n != 1})
    token = f"{w}-token"
    check(all(x["who"] == token for x in status_writes(srv)), "every status write is the Lease holder's",
          {x["who"] for x in status_writes(srv)})
    conflict = status_writes(srv, "default/single-05")
    check([x["code"] for x in conflict] == [409, 200] and ingress(srv, "default/single-05"),
          "a 409 on a status write is decided again, not lost", [(x["code"], x["body"]) for x in conflict])

    ips = {k: ingress(srv, k) for k in keys}
    check(all(len(ips[f"default/dual-req-{i}"]) == 2 and ips[f"default/dual-req-{i}"][0].startswith("10.200.0.") and
              ips[f"default/dual-req-{i}"][1].startswith("fd00:200::") for i in range(4)),
          "RequireDualStack: one address of each family, IPv4 first, one pool",
          [ips[f"default/dual-req-{i}"] for i in range(4)])
    check(all(len(ips[f"default/dual-pref-{i}"]) == 2 for i in range(4)), "PreferDualStack: both families",
          [ips[f"default/dual-pref-{i}"] for i in range(4)])
    check(ips["default/dns-tcp"] == ips["default/dns-udp"] and ips["default/web-a"] == ips["default/web-b"] and
          ips["default/dns-tcp"] != ips["default/web-a"],
          "one sharing key, one address: TCP and UDP on port 53 share",
          [ips[k] for k in ("default/dns-tcp", "default/dns-udp", "default/web-a", "default/web-b")])
    check(ips["default/req-ann"] == ["10.200.0.90"] and ips["default/req-metallb"] == ["10.200.0.91", "fd00:200::71"]
          and ips["default/req-spec"] == ["10.200.0.92"] and ips["default/req-private"] == ["10.201.0.7"],
          "requested addresses, svcgate's and MetalLB's annotations and spec.loadBalancerIP",
          [ips[k] for k in keys if "/req-" in k])
    check(all(ips[f"default/private-{i}"][0].startswith("10.201.0.") for i in range(6)) and
          all(ips[f"team-a/team-{i}"][0].startswith("10.202.0.") for i in range(2)),
          "a pool by annotation (auto_assign false) and a pool by allocate_to",
          [ips[k] for k in keys if "private-" in k or "team-" in k])
    single = sorted(int(ips[f"default/single-{i:02}"][0].rsplit(".", 1)[1]) for i in range(26))
    check(len(set(single)) == 26 and all(a < 90 for a in single), "auto-assigned addresses are the lowest free",
          single)
    ev = [o for o in srv.store.objects["events"].values()]
    check(sum(1 for e in ev if e.get("reason") == "IPAllocated") >= 50 and
          all(e["source"]["component"] == "svcgate-lb" for e in ev),
          f"an IPAllocated event per Service ({len(ev)} events)", {e.get("reason") for e in ev})
    check(not srv.writes_for("services", "default/other-class") and
          ingress(srv, "default/other-class") == ["10.200.0.101"],
          "a Service of another class is never written to", srv.writes_for("services", "default/other-class"))
    pools = {p["name"]: p for p in lb_status(gws[w]).get("pools", [])}
    check(pools.get("private", {}).get("ipv4", {}).get("assigned") == 7 and "ipv6" not in pools.get("private", {})
          and pools.get("public", {}).get("ipv6", {}).get("assigned") == 9,
          "svcgatectl status counts each pool's addresses per family", pools)
    reader = "gw2" if w == "gw1" else "gw1"
    check(wait_for(lambda: {p["name"]: p for p in lb_status(gws[reader]).get("pools", [])} == pools, 10),
          "the reader's counts are the writer's (re-learnt from status)", lb_status(gws[reader]).get("pools"))
    check(gws[w].metric("svcgate_lb_writer") == 1 and gws[reader].metric("svcgate_lb_writer") == 0,
          "svcgate_lb_writer says who writes", (gws[w].metric("svcgate_lb_writer"),
                                                 gws[reader].metric("svcgate_lb_writer")))
    everything = {k: ingress(srv, k) for k in keys + ["default/from-metallb"]}

    # --- SIGKILL of the writer ----------------------------------------------------------------
    before = len(status_writes(srv))
    t0 = time.monotonic()
    gws[w].kill()
    srv.put(service("during-takeover", 70))  # created while nobody writes: the next writer gives it one
    took = wait_for(lambda: writer(gws) == reader and time.monotonic() - t0, LEASE + 5 * RETRY, step=0.05)
    check(took and took <= LEASE + 2.4 * RETRY + 0.5,
          f"SIGKILL of the writer: the other writes {took and round(took, 1)} s later (lease {LEASE} s, retry {RETRY} s)",
          took)
    check(wait_for(lambda: ingress(srv, "default/during-takeover"), 5),
          "a Service created while nobody wrote gets its address from the new writer",
          srv.get("services", "default/during-takeover"))
    time.sleep(1.5)
    others = [x for x in status_writes(srv)[before:] if x["key"] != "default/during-takeover"]
    check({k: ingress(srv, k) for k in everything} == everything and not others,
          "the takeover changes no other address and writes nothing else", others[:5])
    everything["default/during-takeover"] = ingress(srv, "default/during-takeover")
    before = len(status_writes(srv))
    gws[w].start()
    check(wait_for(lambda: lb_status(gws[w]).get("role") == "reader", 20), "the killed gateway comes back a reader",
          lb_status(gws[w]))

    # --- restarts, both orders, 5 times -------------------------------------------------------
    for n in range(5):
        order = ("gw1", "gw2") if n % 2 == 0 else ("gw2", "gw1")
        for name in order:
            gws[name].stop()
            gws[name].start()
        check(wait_for(lambda: writer(gws), 3 * RETRY + 5), f"restart {n + 1} ({' then '.join(order)}): a writer",
              {x: lb_status(g).get("role") for x, g in gws.items()})
    time.sleep(1.5)
    check({k: ingress(srv, k) for k in everything} == everything and len(status_writes(srv)) == before,
          "5 restarts of both gateways in both orders change no address and write nothing",
          status_writes(srv)[before:][:5])

    # --- a pool shrunk by reload --------------------------------------------------------------
    for g in gws.values():
        with open(g.cfg) as f:
            text = f.read()
        with open(g.cfg, "w") as f:
            f.write(text.replace(lb_config(POOLS), lb_config(SHRUNK)))
        g.text("reload")
    outside = {k for k, v in everything.items() if v and v[0].startswith("10.200.0.") and
               int(v[0].rsplit(".", 1)[1]) < 16}
    check(len(outside) >= 10, f"{len(outside)} Services have an address the shrunk pool drops", sorted(outside))

    def moved():
        now = {k: ingress(srv, k) for k in everything}
        return {k for k in now if now[k] != everything[k]}
    check(wait_for(lambda: moved() == outside and all(int(ingress(srv, k)[0].rsplit(".", 1)[1]) >= 16
                                                      for k in outside), 15),
          "a pool shrunk by reload moves exactly the Services outside it",
          ([(k, everything[k], ingress(srv, k)) for k in sorted(moved() - outside)], sorted(outside - moved())))
    check(all(ingress(srv, k)[1:] == everything[k][1:] for k in outside), "their IPv6 addresses stay",
          [(everything[k], ingress(srv, k)) for k in outside][:3])

    # --- a delete frees an address for the oldest pending Service; a type change clears --------
    srv.put(service("private-last", 59, ann={"svcgate.io/address-pool": "private"}))
    check(wait_for(lambda: ingress(srv, "default/private-last"), 10), "the private pool's last address is given",
          ingress(srv, "default/private-last"))
    for i in (1, 2, 3):  # private-late-3 the oldest, created last
        srv.put(service(f"private-late-{i}", {1: 61, 2: 62, 3: 60}[i], ann={"svcgate.io/address-pool": "private"}))
    check(wait_for(lambda: all(any(e.get("reason") == "AllocationFailed" and
                                   e["involvedObject"]["name"] == f"private-late-{i}"
                                   for e in srv.store.objects["events"].values()) for i in (1, 2, 3)), 10),
          "a full pool: each waiting Service is told AllocationFailed",
          [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in srv.store.objects["events"].values()
           if "late" in e["involvedObject"]["name"]])
    freed = ingress(srv, "default/private-0")
    srv.delete("services", "default/private-0")
    check(wait_for(lambda: ingress(srv, "default/private-late-3") == freed, 10) and
          not ingress(srv, "default/private-late-1") and not ingress(srv, "default/private-late-2"),
          "a deleted Service's address goes to the oldest waiting one",
          (freed, [ingress(srv, f"default/private-late-{i}") for i in (1, 2, 3)]))
    o = srv.get("services", "default/single-22")
    o["spec"]["type"] = "ClusterIP"
    srv.put(o)
    check(wait_for(lambda: not ingress(srv, "default/single-22") and "svcgate.io/ip-allocated-from-pool" not in
                   (srv.get("services", "default/single-22")["metadata"].get("annotations") or {}), 10),
          "a Service no longer a LoadBalancer has its status and annotation cleared",
          srv.get("services", "default/single-22").get("status"))


with tempfile.TemporaryDirectory(dir=os.environ.get("KEEP_TMP")) as tmp:
    main(tmp)
checks.finish("the cluster's load balancer against the test API server")
