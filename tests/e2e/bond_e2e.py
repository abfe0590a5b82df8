#!/usr/bin/python3
"""An 802.3ad bond end to end (dataplane.bonds[], docs/operations.md): the gateway's two networks
as VLANs 10 and 20 over one LACP bond of two links. Prints "ok   ..." / "FAIL ..." per check;
exits 1 on a failure.

usage: bond_e2e.py SVCGATE SOURCE_DIR

    gw: svcgate, bond "uplink" of gw-m0, gw-m1 (net_af_packet), ports ext (VLAN 10) and cluster (VLAN 20)
      ║ two links
    lab-tor: dpdk-testpmd, a mode-4 bond of s0, s1, forwarding to tor-lag
             ── tor-trunk: tests/support/vlan_switch.py ── access ports to the client (10) and the nodes (20)

The other side of the LACP bond is DPDK's own (testpmd's net_bonding in mode 4), because this
host's kernel has no bonding driver; testpmd's io forwarding calls the bond's transmit only when
it forwards something, and the driver sends LACP's frames in those calls, so a frame every 50 ms
on tor-trunk (VLAN 10, an EtherType nobody speaks: the gateway counts it as ethertype_unknown)
keeps it sending. Checked: LACP reaches collecting and distributing on both members, seen in
svcgatectl status and the metrics; NodePort connections and a 50 MB download in both families
through the bond; both links carry the gateway's frames.
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

REWIRE = f"""
set -e
ip netns add {TOR}
lab_x {TOR} ip link set lo up
ip -n gw link set gw-ext netns {TOR}
ip -n gw link set gw-cl netns {TOR}
lab_x {TOR} ip link set gw-ext name tor-client
lab_x {TOR} ip link set gw-cl name tor-nodes
lab_link gw gw-m0 {TOR} s0
lab_link gw gw-m1 {TOR} s1
lab_link {TOR} tor-lag {TOR} tor-trunk
for d in gw-m0 gw-m1; do lab_x gw sysctl -qw net.ipv6.conf.$d.disable_ipv6=1; done
for d in tor-client tor-nodes; do lab_x {TOR} ip link set $d up; done
lab_x {TOR} /usr/bin/python3 {src}/tests/support/vlan_switch.py tor-trunk 10=tor-client 20=tor-nodes \\
    >$LAB_RUN/vlan_switch.log 2>&1 &
echo $! >$LAB_RUN/vlan_switch.pid
lab_x {TOR} dpdk-testpmd --no-pci --no-huge -m 256 --file-prefix=svcgate-lab-lag -l 0,1 \\
    --vdev net_af_packet0,iface=s0 --vdev net_af_packet1,iface=s1 \\
    --vdev net_bonding_lag,mode=4,slave=net_af_packet0,slave=net_af_packet1,xmit_policy=l34 \\
    --vdev net_af_packet2,iface=tor-lag -- --forward-mode=io --portmask=0xc --stats-period=3600 \\
    --total-num-mbufs=8192 >$LAB_RUN/testpmd.log 2>&1 </dev/null &
echo $! >$LAB_RUN/testpmd.pid
lab_x {TOR} /usr/bin/python3 -c '
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("tor-trunk", 0))
f = b"\\xff" * 6 + bytes.fromhex("020000000099") + struct.pack("!HHH", 0x8100, 10, 0x88b5) + bytes(46)
while True:
    s.send(f)
    time.sleep(0.05)
' >/dev/null 2>&1 &
echo $! >$LAB_RUN/trickle.pid
for _ in $(seq 1 100); do grep -q running $LAB_RUN/vlan_switch.log && grep -q "start packet forwarding" $LAB_RUN/testpmd.log && break; sleep 0.1; done
grep -q running $LAB_RUN/vlan_switch.log
grep -q "start packet forwarding" $LAB_RUN/testpmd.log
"""

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False
cfg["dataplane"]["bonds"] = [{"name": "uplink", "mode": "802.3ad",
                              "members": ["net_af_packet0,iface=gw-m0", "net_af_packet1,iface=gw-m1"]}]
for p, vlan in zip(cfg["dataplane"]["ports"], (10, 20)):
    p["device"] = "uplink"
    p["vlan"] = vlan
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
    return int(ns(TOR, "cat", f"/sys/class/net/{dev}/statistics/rx_packets").stdout or 0)


try:
    r = checks.lab(src, f"lab_up && lab_start_apps && {{ {REWIRE} }} && lab_start_gateway {svcgate} {tmp.name}")
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

    s0, s1 = link_rx("s0"), link_rx("s1")
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
    d0, d1 = link_rx("s0") - s0, link_rx("s1") - s1
    check(d0 > 100 and d1 > 100, f"both links carry the gateway's frames (s0 {d0}, s1 {d1} frames)")
finally:
    checks.lab(src, f"ip netns pids {TOR} 2>/dev/null | xargs -r kill -9; sleep 0.2; ip netns del {TOR} 2>/dev/null; "
               "rm -rf /var/run/dpdk/svcgate-lab-lag; true")
    checks.lab_end(src, tmp.name)

checks.finish("LACP bond end to end")
