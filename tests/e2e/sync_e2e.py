#!/usr/bin/python3
"""End to end: flow replication between the HA lab's 3 gateways (issue 19; tools/lib/ha.sh with
its sync link). Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.

usage: sync_e2e.py SVCGATE SOURCE_DIR
  - every gateway ready, its peers alive;
  - 30 keep-alive connections, a request every 100 ms each: 10 masqueraded (LoadBalancer, policy
    Cluster), 10 not masqueraded (policy Local), 10 from a pod to a ClusterIP; each is held by
    every gateway (its carrier's flow, the others' replicas);
  - the gateway carrying the most of them is killed with SIGKILL: none of the 30 breaks (the
    longest gap in answers reported, target <= 3 s), a survivor takes over its addresses and
    its connections;
  - it restarts, gets the flows from its peers before it announces, takes traffic again, and
    still none breaks;
  - with 10% of the replication datagrams dropped on the sync link, the periodic refresh gives
    every gateway every connection;
  - forged, replayed and unknown datagrams on the sync link are counted drops that create nothing.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
ns = checks.ns
wait = checks.wait
lab = checks.HaLab(src, ctl, sync=True)
N, RUN, LB4, LOCAL4, EXT4 = lab.N, lab.RUN, lab.LB4, lab.LOCAL4, lab.EXT4
ha, gwjson, hops = lab.sh, lab.gwjson, lab.hops
SVC4 = "10.107.169.79"
SYNC4 = {i: f"10.193.0.{10 + i}" for i in range(1, N + 1)}


def sync_status(i):
    return gwjson(i, "status").get("ha") or {}


def carried(conns, limit=5):
    """Waits (bounded) until every gateway holds every connection of conns; returns how long that
    took (None: not within limit) and how many of them each gateway carries (holds as its own)."""
    everywhere = wait(lambda: all(all(c in held(i) for c in conns) for i in range(1, N + 1)), limit)
    carrier = {}
    for i in range(1, N + 1):
        for c, kind in held(i).items():
            if kind == "own" and c in conns:
                carrier[c] = i
    return everywhere, {i: sum(1 for g in carrier.values() if g == i) for i in range(1, N + 1)}


def held(i):
    """Client tuple (address, port) -> 'own' or 'replica' for every flow gateway i holds."""
    out = {}
    flows = gwjson(i, "flows", "--limit", "10000")
    for f in flows if isinstance(flows, list) else []:
        client = f["original"].split(" ")[1].rsplit(":", 1)
        out[(client[0], int(client[1]))] = "replica" if f.get("replica_of") else "own"
    return out


def ids(kas):
    """(client address, port) of every connection of the keep-alive groups."""
    return [(addr, c["port"]) for addr, k in kas for c in k.read()]


def alive(i):
    return ha(f"kill -0 $(cat $LAB_RUN/gw{i}.pid)").returncode == 0


def main():
    r = ha(f"ha_up {N} && ha_start {N}", timeout=180)
    if not check(r.returncode == 0, f"HA lab with {N} replicating gateways up ({r.stderr.strip()[-300:]})"):
        return
    ready = wait(lambda: all(sync_status(i).get("ready") and all(p["alive"] for p in sync_status(i)["peers"])
                             for i in range(1, N + 1)), 10)
    check(ready is not None, f"every gateway ready, its {N - 1} peers alive ({[sync_status(i).get('ready') for i in range(1, N + 1)]})")

    # 30 keep-alive connections of three kinds.
    kas = [("192.168.66.100", checks.KeepAlive(src, "client", LB4, 10)),
           ("192.168.66.100", checks.KeepAlive(src, "client", LOCAL4, 10)),
           ("10.244.3.5", checks.KeepAlive(src, "lab-sleeper", SVC4, 10))]
    for _, k in kas:
        k.wait_ready(20)
    conns = ids(kas)
    check(len(conns) == 30 and all(k.ready() for _, k in kas), f"30 keep-alive connections answering ({len(conns)})")
    everywhere, per_gw = carried(conns)
    check(everywhere is not None, f"every connection is held by every gateway after {everywhere} s "
                                  f"(carried by: {per_gw})")

    victim = max(per_gw, key=per_gw.get)
    survivors = [i for i in range(1, N + 1) if i != victim]
    t0 = time.monotonic()
    ha(f"kill -9 $(cat $LAB_RUN/gw{victim}.pid)")
    check(wait(lambda: not alive(victim), 5) is not None, f"gw{victim} (carrying {per_gw[victim]} of 30) killed with SIGKILL")
    adopted = wait(lambda: any(p.get("adopted") for i in survivors for p in sync_status(i).get("peers", [])), 5, 0.02)
    adopted = adopted is not None and time.monotonic() - t0
    adopter = next((i for i in survivors if any(p.get("adopted") for p in sync_status(i).get("peers", []))), None)
    check(adopted is not False and adopter == min(survivors),
          f"gw{adopter} took over gw{victim}'s addresses, within {adopted:.2f} s of the kill (dead after 0.6 s of silence)")
    time.sleep(5)
    states = [c for _, k in kas for c in k.read()]
    broken = [c for c in states if c["errors"]]
    gap = max((c["gap"] for c in states), default=0)
    check(not broken, f"none of the 30 connections broke when gw{victim} died ({len(broken)} broke: "
                      f"{[c['errors'][:1] for c in broken][:3]})")
    check(gap <= 3, f"longest gap in answers: {gap:.2f} s (target 3 s)")
    taken = {i: gwjson(i, "status").get("ha", {}).get("takeovers", 0) for i in survivors}
    check(sum(taken.values()) > 0, f"the survivors took over connections: {taken}")

    # The killed gateway comes back: its peers' flows first, then its announcements.
    r = ha(f"ha_start_gateway {victim}", timeout=60)
    back = wait(lambda: len(hops(LB4)) == N, 30)
    check(r.returncode == 0 and back is not None, f"gw{victim} restarted and rejoined the ECMP set after {back} s")
    log = ha(f"cat $LAB_RUN/gw{victim}.log").stdout
    ready_at, healthy_at = log.find("ha: ready after"), log.find("health: healthy, announcing")
    check(0 <= ready_at < healthy_at, "it announced only once its peers had sent it their flows (log order)")
    have = held(victim)
    check(all(c in have for c in conns), f"it holds all 30 connections from its peers ({sum(c in have for c in conns)})")
    time.sleep(4)
    # More than 50 answers on each (5 s of them), however long a busy host takes for them.
    wait(lambda: all(c["ok"] > 50 or c["errors"] for _, k in kas for c in k.read()), 60)
    res = [c for _, k in kas for c in k.stop()]
    broken = [c for c in res if c["errors"]]
    gap = max((c["gap"] for c in res), default=0)
    check(len(res) == 30 and not broken and all(c["ok"] > 50 for c in res),
          f"none of the 30 connections broke through the death and the return of gw{victim} (longest gap "
          f"{gap:.2f} s; {[c['errors'][:1] for c in broken][:3]})")
    rejoined = gwjson(victim, "status").get("ha", {})
    check(rejoined.get("takeovers", 0) > 0 or rejoined.get("events", 0) > 0,
          f"gw{victim} takes traffic again (taken over {rejoined.get('takeovers')}, flows handed on "
          f"{rejoined.get('events')})")

    # 10% of the replication datagrams lost: the refresh heals every replica.
    subprocess.run(["ip", "netns", "exec", "lab-sync", "nft", "-f", "-"], input=(
        "table bridge lossy {\n chain loss {\n type filter hook forward priority 0; policy accept;\n"
        " udp dport 7400 numgen random mod 10 0 counter drop\n }\n}\n"), text=True, timeout=10)
    lossy = checks.KeepAlive(src, "client", LB4, 20)
    lossy.wait_ready(20)
    lconns = [("192.168.66.100", c["port"]) for c in lossy.read()]
    healed = wait(lambda: all(all(c in held(i) for c in lconns) for i in range(1, N + 1)), 12, 0.5)
    dropped = ns("lab-sync", "nft", "list", "table", "bridge", "lossy").stdout.decode()
    n_dropped = int(dropped.split("counter packets ")[1].split()[0]) if "counter packets " in dropped else 0
    check(len(lconns) == 20 and n_dropped > 0 and healed is not None,
          f"10% of sync datagrams dropped ({n_dropped} so far): all 20 new connections on every gateway after "
          f"{healed} s (refresh every 3 s)")
    lossy.stop()
    ns("lab-sync", "nft", "delete", "table", "bridge", "lossy")

    # Forged, replayed and unknown datagrams from the sync link: counted, no flow made.
    target = 1 if victim != 1 else 2
    before = sync_status(target).get("drops", {})
    flows_before = len(held(target))
    ns("lab-sync", "ip", "addr", "add", "10.193.0.99/24", "dev", "br0")
    script = f"""
from scapy.all import IP, UDP, Raw, send, sniff
import os
# A real datagram from gw{survivors[-1] if survivors[-1] != target else survivors[0]} to gw{target}, sent again as it was.
peer = "{SYNC4[survivors[-1] if survivors[-1] != target else survivors[0]]}"
got = sniff(iface="br0", filter="udp and src host " + peer + " and dst host {SYNC4[target]} and dst port 7400",
            count=1, timeout=5)
raw = bytes(got[0][UDP].payload)
send(IP(src=peer, dst="{SYNC4[target]}") / UDP(sport=7400, dport=7400) / Raw(raw), verbose=0)
forged = bytearray(raw); forged[-1] ^= 1
send(IP(src=peer, dst="{SYNC4[target]}") / UDP(sport=7400, dport=7400) / Raw(bytes(forged)), verbose=0)
send(IP(src="10.193.0.99", dst="{SYNC4[target]}") / UDP(sport=7400, dport=7400) / Raw(raw), verbose=0)
send(IP(src=peer, dst="{SYNC4[target]}") / UDP(sport=7400, dport=7400) / Raw(os.urandom(300)), verbose=0)
"""
    r = ns("lab-sync", "/usr/bin/python3", "-c", script, timeout=60)

    def grew(name):
        return sync_status(target).get("drops", {}).get(name, 0) - before.get(name, 0)
    counted = wait(lambda: grew("replayed") >= 1 and grew("bad_mac") >= 1 and grew("unknown_peer") >= 1 and
                   grew("bad_magic") + grew("truncated") >= 1, 5)
    check(r.returncode == 0 and counted is not None,
          f"on gw{target}: a replayed datagram, a forged one, one from an unknown address and noise were counted "
          f"(replayed {grew('replayed')}, bad_mac {grew('bad_mac')}, unknown_peer {grew('unknown_peer')}, "
          f"bad_magic {grew('bad_magic')}) {r.stderr.decode()[-200:]}")
    check(len(held(target)) <= flows_before, f"and made no flow ({flows_before} before, {len(held(target))} after)")

    # A drain hands the connections over (issue 36): once the withdrawal has reached the router,
    # every flow goes to the peers once more and the drained gateway stops in order, its
    # connections still open; the peers take over its addresses at once (it says it leaves) and
    # carry the connections on. No waiting for the connections to end.
    ka = checks.KeepAlive(src, "client", LB4, 10)
    ka.wait_ready(20)
    kconns = [("192.168.66.100", c["port"]) for c in ka.read()]
    _, per_gw = carried(kconns)
    d = max(per_gw, key=per_gw.get)
    t0 = time.monotonic()
    out = subprocess.run([ctl, "--socket", f"{RUN}/gw{d}.sock", "drain", "--timeout", "60"], capture_output=True,
                         text=True, timeout=30).stdout
    gone = wait(lambda: EXT4[d] not in hops(LB4), 5)
    exited = wait(lambda: not alive(d), 20, 0.1)
    took = time.monotonic() - t0
    log = ha(f"cat $LAB_RUN/gw{d}.log").stdout
    said = [l for l in log.splitlines() if "drained:" in l]
    check("draining" in out and gone is not None and exited is not None and took < 10 and
          said and "handed over" in said[-1],
          f"gw{d}, carrying {per_gw[d]} of 10 open connections, drained in {took:.1f} s (under 10 s; withdrawn "
          f"after {gone} s): {said[-1:] or log[-300:]}")
    time.sleep(3)  # the connections go on through the peers
    res = ka.stop()
    longest = max((c["gap"] for c in res), default=None)
    check(len(res) == 10 and not any(c["errors"] for c in res) and longest is not None and longest <= 2,
          f"none of the 10 connections broke through the drain and the exit (longest gap {longest} s, at most 2 s)")
    others = [i for i in range(1, N + 1) if i != d]
    taken = wait(lambda: any(p.get("adopted") for i in others for p in sync_status(i).get("peers", [])), 2, 0.02)
    check(taken is not None, f"its addresses taken over by a peer {taken} s after it left (it said it was leaving)")


try:
    main()
finally:
    ha("lab_down")
checks.finish("flow replication between gateways")
