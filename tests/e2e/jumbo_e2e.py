#!/usr/bin/python3
"""Jumbo frames end to end (dataplane.ports[].mtu up to 9000, docs/operations.md): the lab with
its node network at MTU 9000 (the gateway's cluster port, the switch, the nodes, the pods) and
its client LAN at 1500. Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.

usage: jumbo_e2e.py SVCGATE SOURCE_DIR

The ports are net_af_packet, not the lab's net_af_xdp: DPDK 22.11's AF_XDP driver cannot carry a
frame larger than a page (docs/testing.md). Checked, both families where the issue asks:
- a TCP connection from kube-node-1 to the NodePort (pods on the 9000-byte network) whose MSS is
  a jumbo one carries 100 MB intact;
- an 8,000-byte UDP request and its reply through a ClusterIP, unfragmented;
- towards the 1500-byte client, a 9,000-byte packet with DF set gets fragmentation needed with
  MTU 1500 (IPv4), Packet Too Big (IPv6); without DF (IPv4) it arrives, in fragments.
"""
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
ns = checks.ns

if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)

# The node network at MTU 9000: each pod's link, the nodes' bridges and links, the switch and the
# gateway's side of its link (the bridges follow their ports).
JUMBO = """
set -e
for p in "${LAB_PODS[@]}"; do
    set -- $p
    lab_x "$1" ip link set eth0 mtu 9000
    lab_x "$2" ip link set "v-$1" mtu 9000
done
for n in kube-node-1 kube-node-2; do lab_x $n ip link set eth0 mtu 9000; lab_x $n ip link set cni0 mtu 9000; done
for d in sw-n1 sw-n2 sw-gw br0; do lab_x lab-switch ip link set $d mtu 9000; done
lab_x gw ip link set gw-cl mtu 9000
"""

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False
ext, cluster = cfg["dataplane"]["ports"]
ext["device"] = "net_af_packet0,iface=gw-ext"
# A ring frame of 9,216 bytes holds the tpacket header and a 9,018-byte frame, and fits one jumbo
# mbuf (the driver refuses a ring frame past its mbufs); a block is four frames, a whole number of
# pages and of frames (the driver finds its frames at multiples of framesz).
cluster["device"] = "net_af_packet1,iface=gw-cl,framesz=9216,blocksz=36864"
cluster["mtu"] = 9000
cfg["services"].append({"name": "default/udp-echo", "cluster_ips": ["10.96.50.50", "fd00:96::50:50"],
                        "ports": [{"name": "echo", "protocol": "UDP", "port": 7, "target_port": 80}],
                        "endpoints": [{"ip": "10.244.3.6", "node": "kube-node-2"},
                                      {"ip": "fd00:244:3::6", "node": "kube-node-2"}]})
tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="svcgate-jumbo-", delete=False)
yaml.safe_dump(cfg, tmp)
tmp.close()
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")

# From kube-node-1: GET /blob/N on the NodePort; the MSS the connection settled on, the bytes and
# whether their SHA-256 is the one the server sent.
DOWNLOAD = r"""
import hashlib, socket, sys
n = int(sys.argv[1])
s = socket.create_connection(("192.168.67.8", 30001), timeout=30)
s.sendall(f"GET /blob/{n} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(65536)
head, _, body = buf.partition(b"\r\n\r\n")
want = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"x-sha256:")]
h = hashlib.sha256(body)
got = len(body)
while True:
    d = s.recv(1 << 20)
    if not d:
        break
    h.update(d)
    got += len(d)
print(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG), got, bool(want) and h.hexdigest() == want[0])
"""

# From test-pod-1: an 8,000-byte datagram to the echo ClusterIP, and whether its echo came back
# whole; the socket refuses to fragment (IP_PMTUDISC_DO), so both cross the gateway whole.
UDP = r"""
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
if fam == socket.AF_INET:
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER, IP_PMTUDISC_DO
else:
    s.setsockopt(socket.IPPROTO_IPV6, 23, 2)  # IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO
s.settimeout(3)
msg = bytes((i * 13 + 5) % 256 for i in range(8000))
for _ in range(3):
    s.sendto(msg, (sys.argv[1], 7))
    try:
        print(s.recv(65535) == msg)
        break
    except socket.timeout:
        pass
else:
    print(False)
"""

# The client: one datagram on port 9999, its length and whether it is the pattern SEND sends.
RECEIVE = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("192.168.67.100", 9999))
s.settimeout(10)
try:
    d = s.recv(65535)
    print(len(d), d == bytes((i * 13 + 5) % 256 for i in range(8972)))
except socket.timeout:
    print("none")
"""
SEND = r"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 0)  # IP_MTU_DISCOVER, IP_PMTUDISC_DONT: no DF
time.sleep(1)
s.sendto(bytes((i * 13 + 5) % 256 for i in range(8972)), ("192.168.67.100", 9999))
"""

try:
    r = checks.lab(src, f"lab_up && lab_start_apps && {{ {JUMBO} }} && lab_start_gateway {svcgate} {tmp.name}")
    check(r.returncode == 0, f"lab up, node network at MTU 9000, svcgate running ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)
    log = checks.lab(src, "cat $LAB_RUN/svcgate.log").stdout
    check("jumbo frames:" in log, "the gateway made its jumbo pool: " +
          next((l for l in log.splitlines() if "jumbo frames:" in l), "no line"))

    big = 100 * 1000 * 1000
    r = ns("kube-node-1", "/usr/bin/python3", "-c", DOWNLOAD, str(big), timeout=120)
    out = r.stdout.decode().split()
    mss, got, intact = (int(out[0]), int(out[1]), out[2] == "True") if len(out) == 3 else (0, 0, False)
    check(mss >= 8900 and got == big and intact,
          f"kube-node-1 to NodePort 30001, pods on the 9000-byte network: MSS {mss}, {got} of {big} bytes, "
          f"SHA-256 {'matches' if intact else 'differs'} ({r.stderr.decode()[-200:]})")

    for vip in ("10.96.50.50", "fd00:96::50:50"):
        r = ns("test-pod-1", "/usr/bin/python3", "-c", UDP, vip, timeout=30)
        check(r.stdout.decode().strip() == "True",
              f"an 8,000-byte UDP request to ClusterIP {vip}:7 and its echo, whole ({r.stderr.decode()[-200:]})")

    # To the 1500-byte client: ping's own words for the ICMP error it got back.
    r = ns("test-pod-1", "ping", "-M", "do", "-s", "8972", "-c", "2", "-i", "0.5", "-W", "2", "192.168.67.100",
           timeout=30)
    text = r.stdout.decode() + r.stderr.decode()
    check(re.search(r"Frag needed and DF set \(mtu = 1500\)|mtu=1500|mtu = 1500", text) is not None,
          f"a 9,000-byte IPv4 packet with DF to the client: fragmentation needed, MTU 1500 "
          f"({' / '.join(l for l in text.splitlines() if 'mtu' in l.lower())[:200]})")
    r = ns("test-pod-1", "ping", "-6", "-s", "8952", "-c", "2", "-i", "0.5", "-W", "2", "fd00:67::100", timeout=30)
    text = r.stdout.decode() + r.stderr.decode()
    check(re.search(r"Packet too big: mtu=1500|mtu=1500|mtu = 1500", text) is not None,
          f"a 9,000-byte IPv6 packet to the client: Packet Too Big, MTU 1500 "
          f"({' / '.join(l for l in text.splitlines() if 'mtu' in l.lower())[:200]})")
    # Without DF: the gateway fragments it to 1500; the client's kernel puts it back together. One
    # way only: the lab's net_af_packet ports have the kernel reassemble what they receive
    # (docs/testing.md), and a 9,000-byte reply would not fit the client side's ring.
    rx = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3", "-c", RECEIVE],
                          stdout=subprocess.PIPE, text=True)
    sent = ns("test-pod-1", "/usr/bin/python3", "-c", SEND, timeout=30)
    got = rx.communicate(timeout=30)[0].strip()
    st = checks.gateway_stats(ctl_bin, sock)
    frags = st.get("fragments", {})
    check(sent.returncode == 0 and got == "8972 True" and frags.get("fragments_out", 0) >= 7,
          f"an 8,972-byte UDP datagram without DF to the client: fragmented by the gateway, whole at the "
          f"client ({got or sent.stderr.decode()[-200:]}; fragments {frags})")
    st = checks.gateway_stats(ctl_bin, sock)
    chained = st.get("drops", {}).get("mbuf_chained", 0)
    check(chained == 0, f"no frame arrived chained (mbuf_chained {chained})")
finally:
    checks.lab_end(src, tmp.name)

checks.finish("jumbo frames end to end")
