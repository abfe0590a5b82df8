#!/usr/bin/python3
"""VLAN sub-interfaces end to end (dataplane.ports[].vlan, docs/operations.md): the lab's client
LAN and node network reach the gateway as VLANs 10 and 20 of one 802.1Q trunk, through an 802.1Q
switch (tests/support/vlan_switch.py), as a top-of-rack switch hands a server its networks.
Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.

usage: vlan_e2e.py SVCGATE SOURCE_DIR

    client ── tor-client (access, VLAN 10) ┐
                                   lab-tor: vlan_switch.py ── tor-gw (trunk: 10, 20 tagged) ── gw-trunk [gw: svcgate]
    lab-switch ── tor-nodes (access, VLAN 20) ┘

The lab of tools/lib/lab.sh, its two gateway links moved into lab-tor as the switch's access
ports. The gateway's ports: ext on VLAN 10 and cluster on VLAN 20 of device net_af_xdp0 (one
AF_XDP socket on gw-trunk; the ext port's host interface gw-host). Checked, both families:
NodePort connections from the client, ClusterIP requests from a pod spread over the three pods,
DNS over UDP and TCP through the kube-dns VIP, REJECT without endpoints (TCP RST, ICMP port
unreachable), the kernel's answer through the host path; a capture of the trunk with every frame
tagged, each way, each on its VLAN; a frame tagged with a VLAN no port has counted as
vlan_unknown; each VLAN port's own counters, its VLAN in status, metrics and trace.
"""
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

# The switch (tests/support/vlan_switch.py): the gateway's two links become its access ports (the
# tag goes on as a frame enters, off as it leaves), and a new link to the gateway its trunk.
REWIRE = f"""
set -e
ip netns add {TOR}
lab_x {TOR} ip link set lo up
ip -n gw link set gw-ext netns {TOR}
ip -n gw link set gw-cl netns {TOR}
lab_x {TOR} ip link set gw-ext name tor-client
lab_x {TOR} ip link set gw-cl name tor-nodes
lab_link gw gw-trunk {TOR} tor-gw
lab_x gw sysctl -qw net.ipv6.conf.gw-trunk.disable_ipv6=1  # svcgate's link: no MLD of the kernel's on it
for p in tor-client tor-nodes tor-gw; do lab_x {TOR} ip link set $p up; done
lab_x {TOR} /usr/bin/python3 {src}/tests/support/vlan_switch.py tor-gw 10=tor-client 20=tor-nodes \
    >$LAB_RUN/vlan_switch.log 2>&1 &
echo $! >$LAB_RUN/vlan_switch.pid
for _ in $(seq 1 50); do grep -q running $LAB_RUN/vlan_switch.log && break; sleep 0.1; done
grep -q running $LAB_RUN/vlan_switch.log
"""

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False
ports = cfg["dataplane"]["ports"]
for p, vlan in zip(ports, (10, 20)):
    p["device"] = "net_af_xdp0,iface=gw-trunk"
    p["vlan"] = vlan
ports[0]["host_interface"] = "gw-host"  # the kernel behind the client VLAN: what it sends leaves tagged
# A Service without endpoints: REJECT (TCP RST, ICMP port unreachable) over the trunk.
cfg["services"].append({"name": "default/empty", "cluster_ips": ["10.96.100.9", "fd00:96::100:9"],
                        "ports": [{"name": "http", "protocol": "TCP", "port": 80},
                                  {"name": "dns", "protocol": "UDP", "port": 53}], "endpoints": []})
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-vlan-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")


def ctl(*args):
    return subprocess.run([ctl_bin, "--socket", sock, *args], capture_output=True, text=True, timeout=30)


def served(url, n, flag="-4"):
    """n connections from the client (Connection: close, one curl): how many answered."""
    r = ns("client", "curl", flag, "-s", "-m", "10", "-H", "Connection: close", *[url] * n, timeout=60)
    return len([l for l in r.stdout.decode(errors="replace").splitlines() if l.startswith("test-pod-")])


try:
    r = checks.lab(src, f"lab_up && lab_start_apps && {{ {REWIRE} }} && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, f"lab up on a trunk, svcgate running in namespace gw ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)
    mac = ns("gw", "cat", "/sys/class/net/gw-trunk/address").stdout.decode().strip()

    # The capture on the switch's side of the trunk, while the connections run.
    cap = subprocess.Popen(["ip", "netns", "exec", TOR, "timeout", "40", "tcpdump", "-i", "tor-gw", "-l", "-nn", "-e",
                            "-c", "5000", "ether", "host", mac],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(1)
    n4 = served("http://192.168.67.8:30001/", 20)
    check(n4 == 20, f"20 connections to NodePort 30001 over the trunk (VLAN 10 in, VLAN 20 to the pods): {n4} served")
    n6 = served("http://[fd00:67::8]:30001/", 20, "-6")
    check(n6 == 20, f"IPv6: 20 connections to NodePort [fd00:67::8]:30001 over the trunk: {n6} served")
    # From a pod: ClusterIP requests spread over all three pods, DNS through the kube-dns VIP.
    for url, flag in (("http://10.107.169.79/", "-4"), ("http://[fd00:96::79]/", "-6")):
        r = ns("lab-sleeper", "curl", flag, "-s", "-m", "10", "-H", "Connection: close", *[url] * 30, timeout=60)
        pods = [l for l in r.stdout.decode(errors="replace").splitlines() if l.startswith("test-pod-")]
        check(len(pods) == 30 and len(set(pods)) == 3,
              f"30 ClusterIP requests {url} from lab-sleeper over VLAN 20: {len(pods)} answered, by {sorted(set(pods))}")
    for vip, qtype, want in (("10.96.0.10", "A", "10.107.169.79"), ("fd00:96::a", "AAAA", "fd00:96::79")):
        for tcp in ([], ["+tcp"]):
            r = ns("lab-sleeper", "dig", *tcp, "+short", "+time=2", "+tries=2", qtype, f"@{vip}",
                   "test-svc.default.svc.cluster.local", timeout=30)
            got = r.stdout.decode().strip()
            check(got == want, f"DNS {qtype} over {'TCP' if tcp else 'UDP'} through the kube-dns VIP {vip}: {got}")
    # REJECT, from the dataplane: no endpoints is a TCP RST and an ICMP port unreachable, each tagged
    # (the switch drops an untagged frame), so they arrive at once, not after a timeout.
    for vip in ("10.96.100.9", "fd00:96::100:9"):
        t = time.monotonic()
        r = ns("lab-sleeper", "curl", "-s", "-m", "5", f"http://{vip if ':' not in vip else '[' + vip + ']'}/")
        check(r.returncode == 7 and time.monotonic() - t < 2,
              f"TCP to {vip}, a Service without endpoints: refused at once over VLAN 20 (curl {r.returncode})")
        r = ns("lab-sleeper", "/usr/bin/python3", "-c", f"""
import socket
s = socket.socket(socket.AF_INET6 if ':' in '{vip}' else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect(('{vip}', 53))
s.send(b'x')
try:
    s.recv(100)
    print('answer')
except ConnectionRefusedError:
    print('refused')
except socket.timeout:
    print('timeout')
""", timeout=20)
        check(r.stdout.decode().strip() == "refused",
              f"UDP to {vip}:53 without endpoints: ICMP port unreachable over VLAN 20 ({r.stdout.decode().strip()})")
    # The host path: TCP to the gateway's own address on a port no Service has goes to the kernel
    # behind the client VLAN (host_interface gw-host), whose RST leaves through the port, tagged.
    r = ns("client", "curl", "-s", "-m", "5", "http://192.168.67.8:2222/")
    check(r.returncode == 7, f"TCP to 192.168.67.8:2222: the kernel's RST through the host path, tagged (curl {r.returncode})")
    # Three ARP requests on VLAN 30, which no port of the gateway has, straight onto the trunk
    # (counted from here: the switch's own kernel sends untagged frames onto the trunk too).
    unknown_before = checks.gateway_stats(ctl_bin, sock).get("drops", {}).get("vlan_unknown", 0)
    ns(TOR, "/usr/bin/python3", "-c", "from scapy.all import ARP, Dot1Q, Ether, sendp; "
       "sendp(Ether(dst='ff:ff:ff:ff:ff:ff') / Dot1Q(vlan=30) / ARP(pdst='192.168.30.8'), iface='tor-gw', "
       "count=3, verbose=0)", timeout=60)
    time.sleep(0.5)
    cap.terminate()
    lines = [l for l in cap.communicate(timeout=20)[0].splitlines() if l.strip()]

    # Every frame on the trunk is tagged, both ways: the gateway's to the client on VLAN 10 and to
    # the nodes on VLAN 20, and the client's and the nodes' to it likewise.
    sent = [l for l in lines if l.split()[1].lower() == mac]
    received = [l for l in lines if l.split()[1].lower() != mac]
    untagged = [l for l in lines if "vlan " not in l]
    to_client = [l for l in sent if re.search(r"vlan 10, .*> (192\.168\.67\.100|fd00:67::100)[.: ]", l)]
    to_pods = [l for l in sent if re.search(r"vlan 20, .*> (10\.244\.|fd00:244:)", l)]
    from_client = [l for l in received if re.search(r"vlan 10, .* (192\.168\.67\.100|fd00:67::100)\.\d+ >", l)]
    from_pods = [l for l in received if re.search(r"vlan 20, .* (10\.244\.|fd00:244:)\S* >", l)]
    wrong = [l for l in lines if re.search(r"vlan 10, .*(10\.244\.|fd00:244:)", l) or
             re.search(r"vlan 20, .*(192\.168\.67\.|fd00:67::)", l)]
    check(len(sent) > 100 and not untagged and to_client and to_pods and from_client and from_pods and not wrong,
          f"on the trunk: {len(sent)} frames from the gateway ({len(to_client)} to the client on VLAN 10, "
          f"{len(to_pods)} to the pods on VLAN 20), {len(received)} to it ({len(from_client)} from the client on "
          f"VLAN 10, {len(from_pods)} from the pods on VLAN 20); {len(untagged)} untagged {untagged[:2]}, "
          f"on the wrong VLAN {wrong[:2]}")

    st = checks.gateway_stats(ctl_bin, sock)
    unknown = st.get("drops", {}).get("vlan_unknown", 0) - unknown_before
    vlan30 = [l for l in sent if "vlan 30," in l]
    check(unknown >= 3 and not vlan30,
          f"3 ARP requests on VLAN 30 (no port): {unknown} more vlan_unknown drops, {len(vlan30)} frames answered")
    p = st.get("ports", {})
    ext, cl = p.get("ext", {}), p.get("cluster", {})
    check(ext.get("rx_packets", 0) >= 80 and cl.get("rx_packets", 0) >= 80 and ext.get("tx_packets", 0) >= 80 and
          cl.get("tx_packets", 0) >= 80 and ext.get("rx_packets") != cl.get("rx_packets"),
          f"each VLAN port counts its own frames (ext rx {ext.get('rx_packets')} tx {ext.get('tx_packets')}, "
          f"cluster rx {cl.get('rx_packets')} tx {cl.get('tx_packets')})")
    r = ctl("status", "--json")
    rows = {x["name"]: x for x in json.loads(r.stdout).get("ports", [])} if r.returncode == 0 else {}
    check(rows.get("ext", {}).get("vlan") == 10 and rows.get("cluster", {}).get("vlan") == 20 and
          all(x.get("link") for x in rows.values()),
          f"svcgatectl status --json: each port's VLAN ({ {k: v.get('vlan') for k, v in rows.items()} })")
    r = ctl("status")
    check(r.returncode == 0 and "VLAN 10" in r.stdout and "VLAN 20" in r.stdout,
          "svcgatectl status shows each port's VLAN")
    text = subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5", f"http://{cfg['control']['metrics']}/metrics"],
                          capture_output=True, text=True, timeout=30).stdout
    rx = {m.group(1): float(m.group(2)) for m in
          re.finditer(r'^svcgate_port_packets_total\{port="(\w+)",direction="rx"\} (\S+)$', text, re.M)}
    check(rx.get("ext", 0) >= 80 and rx.get("cluster", 0) >= 80,
          f"svcgate_port_packets_total per VLAN port ({rx})")
    got = ctl("trace", "--config", tmp.name, "--json", "tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]")
    tr = json.loads(got.stdout.splitlines()[0]) if got.returncode == 0 and got.stdout else {}
    check(tr.get("port") == "cluster" and tr.get("vlan") == 20,
          f"svcgatectl trace --config of the trunk: out on cluster, VLAN {tr.get('vlan')}")
finally:
    checks.lab(src, f"ip netns pids {TOR} 2>/dev/null | xargs -r kill -9; ip netns del {TOR} 2>/dev/null; true")
    checks.lab_end(src, tmp.name)

checks.finish("VLAN trunk end to end")
