#!/usr/bin/python3
"""An 802.3ad bond end to end (dataplane.bonds[], docs/operations.md): the trunk lab
(tools/lib/trunk.sh, config/trunk.yaml), the gateway's two networks as VLANs 10 and 20 over an
LACP bond of two links to testpmd's own mode-4 bond. Prints "ok   ..." / "FAIL ..." per check;
exits 1 on a failure.

usage: bond_e2e.py SVCGATE SOURCE_DIR

Checked: LACP reaches collecting and distributing on both members, seen in svcgatectl status and
the metrics; NodePort connections in both families and a 50 MB download through the bond; both
links carry the gateway's frames; one link lost (both TAPs down, as a pulled cable) in the middle
of a 200 MB download and of six keep-alive connections, then back: the member leaves the
aggregate and returns to it, the download is intact, no connection breaks, and the longest gap
between two answers is printed.
"""
import hashlib
import json
import os
import re
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
TOR = "lab-tor"

if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)

with open(os.path.join(src, "config", "trunk.yaml")) as f:
    cfg = yaml.safe_load(f)
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-bond-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")
DISTRIBUTING = ["active", "aggregatable", "in_sync", "collecting", "distributing"]


def ctl(*args):
    return subprocess.run([ctl_bin, "--socket", sock, *args], capture_output=True, text=True, timeout=30)


def members():
    r = ctl("status", "--json")
    ports = json.loads(r.stdout).get("ports", []) if r.returncode == 0 else []
    return ports[0].get("bond", []) if ports else []


def served(url, n, flag="-4"):
    r = ns("client", "curl", flag, "-s", "-m", "10", "-H", "Connection: close", *[url] * n, timeout=60)
    return len([l for l in r.stdout.decode(errors="replace").splitlines() if l.startswith("test-pod-")])


def link_rx(dev):
    """What the gateway sent on a link: what the veth on the switch's side received, read in
    /proc/PID/net/dev of a process in the switch's namespace, with no process started (a read
    through `ip netns exec` once waited more than 60 s on a loaded host)."""
    with open(f"/proc/{checks.netns_pid(TOR)}/net/dev") as f:
        for line in f:
            name, _, counters = line.partition(":")
            if name.strip() == dev:
                return int(counters.split()[1])  # receive: bytes, packets, ...
    raise LookupError(f"{dev}: not in {TOR}")


try:
    r = checks.lab(src, f"source {src}/tools/lib/trunk.sh; lab_up && lab_start_apps && lab_trunk_up && "
                   f"lab_start_gateway {svcgate} {tmp.name} && lab_trunk_join_gateway")
    check(r.returncode == 0, f"lab up on a bond of two links, svcgate running ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)

    up = checks.wait(lambda: len(members()) == 2 and all(
        m.get("active") and m.get("actor") == DISTRIBUTING and m.get("partner") == DISTRIBUTING for m in members()), 20)
    m = members()
    check(up, "LACP: both members collecting and distributing, as svcgatectl status --json says "
          f"({[(x.get('device'), x.get('actor'), x.get('partner')) for x in m]})")
    text = ctl("status").stdout
    check(text.count("LACP actor active,aggregatable,in_sync,collecting,distributing") == 2,
          "svcgatectl status: each member's LACP state")
    metrics = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5",
                              f"http://{cfg['control']['metrics']}/metrics"], capture_output=True, text=True,
                             timeout=30).stdout
    states = re.findall(r'^svcgate_bond_member_lacp_state\{port="ext",member="([^"]+)",side="(\w+)"\} (\d+)$',
                        metrics, re.M)
    check(len(states) == 4 and all(int(v) == 0x3d for _, _, v in states),
          f"svcgate_bond_member_lacp_state: 0x3d (active, aggregatable, in sync, collecting, distributing) "
          f"for each member and side ({states})")

    s0, s1 = link_rx("c0"), link_rx("c1")
    n4 = served("http://192.168.67.8:30001/", 30)
    check(n4 == 30, f"30 connections to NodePort 30001 through the bond, VLAN 10 in, VLAN 20 to the pods: {n4} served")
    n6 = served("http://[fd00:67::8]:30001/", 30, "-6")
    check(n6 == 30, f"IPv6: 30 connections to NodePort [fd00:67::8]:30001 through the bond: {n6} served")
    big = 50 * 1000 * 1000
    r = ns("client", "curl", "-s", "-m", "60", "-D", "-", "http://192.168.67.8:30001/blob/" + str(big), timeout=90)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
    check(len(body) == big and want and hashlib.sha256(body).hexdigest() == want[0],
          f"a 50 MB download through the bond, intact ({len(body)} bytes)")
    d0, d1 = link_rx("c0") - s0, link_rx("c1") - s1
    check(d0 > 100 and d1 > 100, f"both links carry the gateway's frames (link 0 {d0}, link 1 {d1} frames)")

    # A link lost in the middle of a 200 MB download and of six keep-alive connections, then back.
    run = tempfile.mkdtemp(prefix="svcgate-bond-")
    state, stop = os.path.join(run, "keepalive.json"), os.path.join(run, "stop")
    ka = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3",
                           os.path.join(src, "tests/e2e/keepalive.py"), "192.168.67.8", "6", state, stop, "30001"])

    def ka_state():
        try:
            with open(state) as f:
                return json.load(f)
        except (OSError, ValueError):
            return []
    checks.wait(lambda: len(ka_state()) == 6 and all(c["ok"] >= 3 for c in ka_state()), 15)
    big = 200 * 1000 * 1000
    head_file, body_file = os.path.join(run, "head"), os.path.join(run, "body")
    t0 = time.monotonic()
    dl = subprocess.Popen(["ip", "netns", "exec", "client", "curl", "-s", "-m", "120", "-D", head_file, "-o", body_file,
                           f"http://192.168.67.8:30001/blob/{big}"])
    before = [link_rx("c0"), link_rx("c1")]
    time.sleep(1.5)
    # The link the download's frames took (the hash picks one per flow): lost both ends, as a cable.
    moved = [link_rx(f"c{i}") - before[i] for i in (0, 1)]
    k = 0 if moved[0] >= moved[1] else 1
    cut = f"ip -n gw link set gw-t{k} {{0}} && ip -n lab-tor link set s{k} {{0}}"
    checks.lab(src, cut.format("down"))
    t_cut = time.monotonic()
    gone = checks.wait(lambda: len(members()) == 2 and not members()[k].get("link") and
                       not members()[k].get("active") and members()[1 - k].get("active"), 10)
    during = members()
    check(gone and moved[k] > 1000,
          f"link {k}, carrying {moved[k]} of the gateway's frames in the 1.5 s before (link {1 - k} {moved[1 - k]}), "
          f"down: svcgatectl status shows it down and out of the aggregate, link {1 - k} carrying "
          f"({[(x.get('device'), x.get('link'), x.get('active')) for x in during]})")
    time.sleep(2)
    checks.lab(src, cut.format("up"))
    back = checks.wait(lambda: len(members()) == 2 and all(
        m.get("link") and m.get("active") and m.get("actor") == DISTRIBUTING and m.get("partner") == DISTRIBUTING
        for m in members()), 30)
    t_back = time.monotonic()
    check(back, f"link {k} back: both members collecting and distributing again after {t_back - t_cut:.1f} s")
    dl.wait(timeout=150)
    took = time.monotonic() - t0
    with open(head_file, "rb") as f:
        head = f.read()
    want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
    h, n = hashlib.sha256(), 0
    with open(body_file, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            n += len(chunk)
    check(dl.returncode == 0 and n == big and want and h.hexdigest() == want[0],
          f"the 200 MB download across the link's loss and return: {n} bytes intact in {took:.1f} s")
    open(stop, "w").close()
    ka.wait(timeout=30)
    conns = ka_state()
    gap = max((c["gap"] for c in conns), default=0)
    check(len(conns) == 6 and all(not c["errors"] and c["ok"] > 20 for c in conns),
          f"six keep-alive connections unbroken, a request every 100 ms; the longest gap {gap:.2f} s "
          f"({[(c['ok'], c['errors'][:1]) for c in conns]})")
    subprocess.run(["rm", "-rf", run])
finally:
    checks.lab(src, f"source {src}/tools/lib/trunk.sh; lab_stop_gateway; lab_down; lab_trunk_down")
    checks.lab_end(src, tmp.name)

checks.finish("LACP bond end to end")
