#!/usr/bin/python3
"""End to end: the HA lab under load (issue 36 acceptance). Three replicating gateways
(tools/lib/ha.sh with its sync link); traffic from the client all along:
  - six paced bulk downloads (tests/e2e/downloads.py), four over IPv4 and two over IPv6, each at
    RATE (3 MiB/s), one blob after another, every blob checked against its digest: one per family
    to default/preserve-lb (client_ip preserve: the pods see the client's address), the others to
    the masqueraded policy-Cluster LoadBalancer;
  - twelve keep-alive connections (tests/e2e/keepalive.py), six per family, a request every 100 ms,
    and four more to default/preserve-lb, two per family.

1. Steady: STEADY seconds (90) with no failure injected. No BFD session and no BGP session of the
   router goes down (their start times unchanged), no keep-alive answer gap above 1 s, the
   downloads keep their pace.
2. A rolling restart of all three gateways (tools/lab rolling-restart: each drained, restarted and
   waited for in turn), then a SIGKILL of the gateway carrying the most flows and its restart. No
   download broken, no connection broken, no gap above 2 s, each drain done in under 10 s.
Prints the longest gaps, each drain's duration and the rates reached.

usage: ha_load_e2e.py SVCGATE SOURCE_DIR [STEADY_SECONDS]
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
STEADY = float(sys.argv[3]) if len(sys.argv) > 3 else 90
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
wait = checks.wait
lab = checks.HaLab(src, ctl, sync=True)
N, LB4, LB6, PRESERVE4, PRESERVE6 = lab.N, lab.LB4, lab.LB6, lab.PRESERVE4, lab.PRESERVE6
ha, gwjson, hops = lab.sh, lab.gwjson, lab.hops
RATE = 3 * 1024 * 1024
BLOB = 30 * 1024 * 1024  # 10 s a blob at RATE: every failure falls inside some downloads


class Downloads(checks.Client):
    """tests/e2e/downloads.py in the client's namespace, one paced loop per URL. stop() lets every
    loop finish the blob in hand (BLOB / RATE s, more on a slow host)."""

    def __init__(self, urls):
        super().__init__(src, "client", "downloads.py", ["{state}", "{stop}", str(RATE), str(BLOB), *urls],
                         stop_limit=60)

    def received(self):
        return sum(d["bytes"] for d in self.read())


def sessions():
    """The router's BGP sessions and BFD sessions: name -> (state, since)."""
    out = {}
    for line in ha("ha_birdc router show protocols").stdout.splitlines():
        w = line.split()
        if len(w) >= 6 and w[0].startswith("gw") and w[1] == "BGP":
            out["bgp " + w[0]] = (w[3] + " " + w[5], w[4])
    for line in ha("ha_birdc router show bfd sessions").stdout.splitlines():
        w = line.split()
        if len(w) >= 4 and w[1] == "r-lan":
            out["bfd " + w[0]] = (w[2], w[3])
    return out


def all_up(s):
    return len(s) == 4 * N and all(st in ("up Established", "Up") for st, _ in s.values())


def seconds(since):
    """BIRD's HH:MM:SS.mmm as seconds of the day."""
    h, m, s = since.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def restarted(before, after):
    """The sessions whose state changed, or whose start moved: BIRD prints the same start a
    millisecond apart from one call to the next, a restart moves it by seconds."""
    return {k: (before.get(k), v) for k, v in after.items()
            if k not in before or before[k][0] != v[0] or abs(seconds(before[k][1]) - seconds(v[1])) > 0.5}


def gaps(kas):
    recs = [c for k in kas for c in k.read()]
    return recs, max((c["gap"] for c in recs), default=None), [c for c in recs if c["errors"]]


def own_flows(i):
    flows = gwjson(i, "flows", "--limit", "100000")
    return sum(1 for f in flows if not f.get("replica_of")) if isinstance(flows, list) else 0


def main():
    r = ha(f"ha_up {N} && ha_start {N}", timeout=180)
    if not check(r.returncode == 0, f"HA lab with {N} replicating gateways up ({r.stderr.strip()[-300:]})"):
        return None, []
    ready = wait(lambda: all((gwjson(i, "status").get("ha") or {}).get("ready") for i in range(1, N + 1)), 10)
    check(ready is not None, "every gateway ready")
    # Every TCP reset between the gateways and the router, with the MACs (which gateway), for the
    # reader of a failure.
    global resets
    resets = subprocess.Popen(["timeout", "600", "ip", "netns", "exec", "router", "tcpdump", "-i", "r-lan", "-nn",
                               "-e", "-l", "-tttt", "(tcp[tcpflags] & tcp-rst != 0) or (ip6 and ip6[6] == 6 and ip6[53] & 4 != 0)"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    # The preserved Service: the pods see the client's own address, in both families.
    for addr, client in ((PRESERVE4, "192.168.66.100"), (f"[{PRESERVE6}]", "fd00:66::100")):
        r = checks.ns("client", "curl", "-s", "-m", "5", "-H", "Connection: close", *[f"http://{addr}/peer"] * 9)
        seen = {line.split()[-1].removeprefix("::ffff:") for line in r.stdout.decode().splitlines()}
        check(r.returncode == 0 and seen == {client}, f"preserve-lb {addr}: the pods saw {sorted(seen)}")
    dl = Downloads([f"http://{LB4}"] * 3 + [f"http://{PRESERVE4}", f"http://[{LB6}]", f"http://[{PRESERVE6}]"])
    kas = [checks.KeepAlive(src, "client", LB4, 6), checks.KeepAlive(src, "client", LB6, 6)]
    global kas_p
    kas_p = [checks.KeepAlive(src, "client", PRESERVE4, 2), checks.KeepAlive(src, "client", PRESERVE6, 2)]
    for k in kas + kas_p:
        k.wait_ready(30)
    check(all(k.ready() for k in kas), f"12 keep-alive connections answering ({[len(k.read()) for k in kas]})")
    check(all(k.ready() for k in kas_p), f"4 preserved keep-alive connections answering ({[len(k.read()) for k in kas_p]})")

    # 1. Steady load, nothing injected.
    before = sessions()
    check(all_up(before), f"every BGP and BFD session of the router up ({len(before)} of {4 * N})")
    b0, t0 = dl.received(), time.monotonic()
    time.sleep(STEADY)
    got, took = dl.received() - b0, time.monotonic() - t0
    after = sessions()
    changed = restarted(before, after)
    check(all_up(after) and not changed, f"{took:.0f} s of load: no BFD or BGP session went down or restarted "
                                         f"({changed or 'all held'})")
    recs, gap, broken = gaps(kas + kas_p)
    check(not broken and gap is not None and gap <= 1,
          f"no keep-alive answer gap above 1 s (longest {gap} s; broken {[c['errors'][:1] for c in broken][:3]})")
    per = got / took / 6 / 1e6
    check(per >= 0.9 * RATE / 1e6, f"the downloads kept their pace: {per:.2f} MB/s each on average "
                                   f"(paced at {RATE / 1e6:.2f})")
    bad = [d for d in dl.read() if d["errors"]]
    check(not bad, f"every download so far intact ({sum(d['intact'] for d in dl.read())} done; "
                   f"broken: {[d['errors'][:1] for d in bad][:3]})")

    # 2. A rolling restart of every gateway, then a SIGKILL of the busiest and its return.
    print(f"rolling restart from {time.strftime('%H:%M:%S')}")
    r = ha(f"ha_rolling_restart {N} {svcgate}", timeout=400)
    print(r.stdout.strip())
    drains = [float(line.split("drained in ")[1].split()[0]) for line in r.stdout.splitlines()
              if "drained in " in line]
    check(r.returncode == 0 and len(drains) == N and max(drains) < 10,
          f"rolling restart of {N} gateways under load: drains took {drains} s (each under 10 s) {r.stderr[-300:]}")
    per_gw = {i: own_flows(i) for i in range(1, N + 1)}
    victim = max(per_gw, key=per_gw.get)
    print(f"SIGKILL of gw{victim} at {time.strftime('%H:%M:%S')}")
    ha(f"kill -9 $(cat $LAB_RUN/gw{victim}.pid)")
    shrink = wait(lambda: len(hops(LB4)) == N - 1, 5)
    check(shrink is not None, f"gw{victim} (carrying {per_gw[victim]} flows of {sum(per_gw.values())}) killed "
                              f"with SIGKILL; out of the router's ECMP set after {shrink and round(shrink, 2)} s")
    time.sleep(3)
    print(f"gw{victim} started again at {time.strftime('%H:%M:%S')}")
    r = ha(f"ha_start_gateway {victim} {svcgate} && ha_wait_paths 30 {LB4} {N}", timeout=60)
    check(r.returncode == 0, f"gw{victim} back in the ECMP set {r.stdout.strip()} s after its start")
    time.sleep(5)
    waited = {i: gwjson(i, "stats").get("drops", {}).get("pickup_awaits_replica", 0) for i in range(1, N + 1)}
    print(f"packets of moved connections that waited for their replica (since each gateway's start): {waited}")
    recs, gap, broken = gaps(kas)
    check(len(recs) == 12 and not broken and gap is not None and gap <= 2,
          f"no keep-alive connection broke, longest gap {gap} s (at most 2 s; broken "
          f"{[c['errors'][:1] for c in broken][:3]})")
    recs, gap, broken = gaps(kas_p)
    check(len(recs) == 4 and not broken and gap is not None and gap <= 2,
          f"no preserved keep-alive connection broke, longest gap {gap} s (at most 2 s; broken "
          f"{[c['errors'][:1] for c in broken][:3]})")
    return dl, kas + kas_p


dl, kas, kas_p, resets = None, [], [], None
try:
    dl, kas = main()
finally:
    res = [c for k in kas or kas_p for c in k.stop()]
    done = dl.stop() if dl else []
    if resets:
        resets.terminate()
        lines = resets.communicate(timeout=10)[0].splitlines()
        if any(d["errors"] for d in done):
            print(f"TCP resets seen on the router's gateway LAN ({len(lines)}):")
            print("\n".join(lines[:20]))
    if any(d["errors"] for d in done):  # what each gateway refused, for the reader of a failure
        for i in range(1, N + 1):
            st = gwjson(i, "stats")
            refused = {k: v for kind in ("drops", "rejects") for k, v in st.get(kind, {}).items() if v}
            print(f"gw{i} (since its last start): refused {refused}, flows {st.get('flows')}")
    ha("lab_down")
if dl:
    bad = [d for d in done if d["errors"]]
    check(done and not bad and all(d["intact"] > 0 for d in done),
          f"every download intact through all of it: {[d['intact'] for d in done]} blobs of {BLOB >> 20} MiB; "
          f"longest stall {max(d['stall'] for d in done):.2f} s; broken: {[d['errors'][:1] for d in bad][:3]}")
checks.finish("the HA lab under load")
