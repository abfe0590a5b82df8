#!/usr/bin/python3
"""NAT events to a real IPFIX collector (export.ipfix, docs/flow-logs.md), both families, in the lab
of tools/lib/lab.sh: Debian's nfcapd (nfdump) collects on the gateway's loopback, and nfdump reads
what it stored. Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.

usage: ipfix_e2e.py SVCGATE SOURCE_DIR

Checked: 60 NodePort connections of each family, masqueraded and closed, and 10 left open: the
collector holds a create for each and a delete for each closed one, their tuples before and after
the translation the ones the client used and the pods saw (GET /peer-port), and no delete for the
open ones; each delete's packets and octets both ways, against the bytes the client sent and
received; a DNS query's create and delete, and its counts to the byte; a preserving Service's records keep the client's
address and port. nfcapd stopped: connections go on, the refused messages are counted; started
again: the templates come again and the records with them. svcgatectl flows --top during a SYN
flood from 3 sources names them first; status shows each family's table. Over TCP (a restart with
transport: tcp): libfixbuf's ipfixDump decodes the stream, the IPv6 post-NAT addresses and the
counts included, and a connection the collector closed is made again, templates first.

nfdump 1.7.1 keeps no IPv6 post-NAT address (it reads IEs 281 and 282 from NetFlow v9 only), so
for IPv6 the post-NAT ports are checked through it and the addresses by the unit tests.
"""
import ipaddress
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

if os.geteuid() != 0:
    print("FAIL the end-to-end test needs root (network namespaces)")
    sys.exit(1)
if not shutil.which("nfcapd") or not shutil.which("nfdump") or not shutil.which("ipfixDump"):
    print("FAIL nfcapd, nfdump or ipfixDump is not installed (Debian's nfdump and libfixbuf-tools; tools/test "
          "installs them)")
    sys.exit(1)

with open(os.path.join(src, "config", "lab.yaml")) as f:
    cfg = yaml.safe_load(f)
cfg["control"]["watch"] = False
cfg["export"] = {"ipfix": {"collectors": ["127.0.0.1:9995"], "template_refresh_s": 5}}
# Closed connections and answered datagrams leave the table within seconds, so their deletes come.
cfg["dataplane"]["flow_table"]["timeouts"] = {k: 1 for k in ("tcp_fin_wait", "tcp_last_ack", "tcp_time_wait",
                                                              "tcp_close")} | {"udp_replied": 2, "udp_unreplied": 2}
pods = next(s for s in cfg["services"] if s["name"] == "default/test-svc")["endpoints"]
cfg["services"].append({"name": "default/preserve-svc", "type": "NodePort", "client_ip": "preserve",
                        "cluster_ips": ["10.96.60.1", "fd00:96::60:1"],
                        "ports": [{"name": "http", "protocol": "TCP", "port": 80, "node_port": 30002}],
                        "endpoints": pods})
work = tempfile.mkdtemp(prefix="svcgate-ipfix-")
cfg_path = f"{work}/svcgate.yaml"
with open(cfg_path, "w") as f:
    yaml.safe_dump(cfg, f)
sock = cfg["control"]["socket"]
ctl_bin = os.path.join(os.path.dirname(svcgate), "svcgatectl")

# Connections from the client, each with its own source port: "go N HOST PORT PATH" opens N, each
# asking PATH once (Connection: close unless held) and prints one JSON line per connection
# (sport, answer); "hold" keeps them open until stdin ends.
CLIENT = r"""
import json, socket, sys
held = []
for line in sys.stdin:
    cmd, n, host, port, path, mode = line.split()
    out = []
    for _ in range(int(n)):
        s = socket.create_connection((host, int(port)), timeout=5)
        req = f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: {'keep-alive' if mode == 'hold' else 'close'}\r\n\r\n".encode()
        s.sendall(req)
        data = b""
        while True:  # closing: to the server's end, so every byte it sent is counted here
            if mode == "hold" and b"\r\n\r\n" in data and data.rstrip().split(b"\r\n")[-1].startswith(b"test-pod-"):
                break
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        out.append({"sport": s.getsockname()[1], "answer": data.rstrip().split(b"\r\n")[-1].decode(),
                    "sent": len(req), "got": len(data)})
        if mode == "hold":
            held.append(s)
        else:
            s.close()
    print(json.dumps(out), flush=True)
"""


class Client:
    def __init__(self):
        self.p = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3", "-c", CLIENT],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def go(self, n, host, port, path="/peer-port", mode="close"):
        self.p.stdin.write(f"go {n} {host} {port} {path} {mode}\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline() or "[]")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def nfcapd_start(d):
    os.makedirs(d, exist_ok=True)
    return subprocess.run(["ip", "netns", "exec", "gw", "nfcapd", "-w", d, "-p", "9995", "-b", "127.0.0.1", "-t", "2",
                           "-P", f"{d}/nfcapd.pid", "-D"], capture_output=True, text=True, timeout=30).returncode == 0


def nfcapd_stop(d):
    """SIGTERM: nfcapd writes its file out (a file is readable once rotated or ended)."""
    try:
        pid = int(open(f"{d}/nfcapd.pid").read())
    except (OSError, ValueError):
        return
    subprocess.run(["kill", "-TERM", str(pid)])
    checks.wait(lambda: not os.path.exists(f"/proc/{pid}"), 10)


def records(d, flt):
    """nfdump's records under filter `flt`: (event, proto, src, sport, dst, dport, nsrc, nsport, ndst, ndport,
    packets in, packets out, bytes in, bytes out)."""
    r = subprocess.run(["nfdump", "-R", d, "-q", "-N", "-6", "-o",
                        "fmt:%nevt,%pr,%sa,%sp,%da,%dp,%nsa,%nsp,%nda,%ndp,%ipkt,%opkt,%ibyt,%obyt", flt],
                       capture_output=True, text=True, timeout=60)
    out = []
    for line in r.stdout.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != 14 or not f[1].isdigit():
            continue
        ip = lambda a: str(ipaddress.ip_address(a))  # noqa: E731
        out.append((f[0], int(f[1]), ip(f[2]), int(f[3]), ip(f[4]), int(f[5]), ip(f[6]), int(f[7]), ip(f[8]),
                    int(f[9]), *(int(x) for x in f[10:14])))
    return out


# A DNS query from a pod, sent by hand so that its size and its answer's are known: prints both.
DNS_QUERY = r"""
import socket, struct, sys
vip = sys.argv[1]
q = struct.pack("!HHHHHH", 0x5167, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in "test-svc.default.svc.cluster.local".split(".")) + b"\0"
q += struct.pack("!HH", 28 if ":" in vip else 1, 1)
s = socket.socket(socket.AF_INET6 if ":" in vip else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(q, (vip, 53))
print(len(q), len(s.recv(65535)))
"""


# A TCP collector's socket: each connection's bytes into a file of its own (DIR/TAG-1, TAG-2, ...),
# for libfixbuf's ipfixDump to decode: IPFIX over TCP is a stream of messages, as a file is.
TCP_SINK = r"""
import socket, sys
d, tag = sys.argv[1], sys.argv[2]
srv = socket.create_server(("127.0.0.1", 4740))
n = 0
while True:
    c, _ = srv.accept()
    n += 1
    with open(f"{d}/{tag}-{n}", "wb") as f:
        while True:
            b = c.recv(65536)
            if not b:
                break
            f.write(b)
            f.flush()
    c.close()
"""


def ipfix_dump(path):
    """libfixbuf's decoding of an IPFIX stream: its data records, each as {element name: value}, and
    how many template records it read."""
    r = subprocess.run(["ipfixDump", "--in", path], capture_output=True, text=True, timeout=30)
    recs, cur = [], None
    for line in r.stdout.splitlines():
        if line.startswith("--- data record"):
            cur = {}
            recs.append(cur)
        elif line.startswith("---"):
            cur = None
        elif cur is not None and (m := re.match(r"\s*\([\d/]+\)\s+(\w+) : (.*)$", line)):
            cur[m.group(1)] = m.group(2).strip()
    t = re.search(r"(\d+) Template Records", r.stdout)
    return recs, int(t.group(1)) if t else 0


def counted(fam, conns, counts_of):
    """Each closed connection's counts (packets and octets each way, or None) against the bytes its
    client sent and received: (exact, over, wrong). Exact: the payload left once the headers of the
    packets counted are taken off (tcp_payload) is what the client sent and got. Over: more, as a
    retransmission or a duplicate ACK with SACK blocks (larger headers) in the lab makes it."""
    exact, over, wrong = 0, [], []
    for c in conns:
        n = counts_of(c)
        if not n or n[0] < 3 or n[1] < 2:
            wrong.append((c["sport"], n))
            continue
        got = (tcp_payload(fam, n[0], n[2]), tcp_payload(fam, n[1], n[3]))
        if got == (c["sent"], c["got"]):
            exact += 1
        elif got[0] >= c["sent"] and got[1] >= c["got"]:
            over.append((c["sport"], n))
        else:
            wrong.append((c["sport"], n))
    return exact, over, wrong


def tcp_payload(fam, packets, octets):
    """The TCP payload a direction's counts leave once its headers are taken off: Linux's SYN and
    SYN-ACK carry 20 bytes of options (MSS, SACK, timestamps, window scale), its later segments 12
    (timestamps), so IPv4 packets have 60 and 52 bytes of headers, IPv6 80 and 72."""
    ip = 20 if fam == 4 else 40
    return octets - (ip + 40) - (packets - 1) * (ip + 32)


def metric(text, name, labels):
    m = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def metrics():
    return subprocess.run(["ip", "netns", "exec", "gw", "curl", "-s", "-m", "5",
                           f"http://{cfg['control']['metrics']}/metrics"], capture_output=True, text=True,
                          timeout=30).stdout


POD_ADDR = {"10.244.2.4": "test-pod-1", "10.244.2.6": "test-pod-2", "10.244.3.6": "test-pod-3",
            "fd00:244:2::4": "test-pod-1", "fd00:244:2::6": "test-pod-2", "fd00:244:3::6": "test-pod-3"}
d1, d2 = f"{work}/c1", f"{work}/c2"
client = None
try:
    r = checks.lab(src, "lab_up && lab_start_apps")
    check(r.returncode == 0 and nfcapd_start(d1), "lab up, nfcapd collecting on the gateway's loopback")
    r = checks.lab(src, f"lab_start_gateway {svcgate} {cfg_path}")
    check(r.returncode == 0, f"svcgate running with export.ipfix ({(r.stderr or '').strip()[-300:]})")
    if r.returncode != 0:
        sys.exit(1)
    client = Client()
    fams = {4: ("192.168.67.8", "192.168.67.100", "10.192.0.2", "nat event = 4", "nat event = 5"),
            6: ("fd00:67::8", "fd00:67::100", "fd00:192::2", "nat event add", "nat event delete")}
    opened, closed = {}, {}
    for fam, (np, _, _, _, _) in fams.items():
        opened[fam] = client.go(10, np, 30001, mode="hold")
        closed[fam] = client.go(60, np, 30001)
        check(len(opened[fam]) == 10 and len(closed[fam]) == 60,
              f"IPv{fam}: 10 connections held open and 60 closed through NodePort 30001")
    preserved = client.go(5, "192.168.67.8", 30002)
    dns_sizes = {}
    for vip in ("10.96.0.10", "fd00:96::a"):
        r = subprocess.run(["ip", "netns", "exec", "lab-sleeper", "/usr/bin/python3", "-c", DNS_QUERY, vip],
                           capture_output=True, text=True, timeout=30)
        dns_sizes[vip] = tuple(int(x) for x in r.stdout.split()) if r.returncode == 0 else None
    # The closed flows' timeouts (1 s, 2 s for DNS), then the ageing pass (2 s): their deletes
    # encoded, 120 through 30001, 5 through 30002 and the 2 DNS queries' (at most 20 s: a fixed 6 s
    # was once too short for the IPv4 DNS query's delete on a busy host).
    checks.wait(lambda: (metric(metrics(), "svcgate_ipfix_events_total", 'event="delete"') or 0) >= 127, 20, step=0.5)
    time.sleep(0.5)  # the last message on its way to nfcapd, on loopback
    m = metrics()
    nfcapd_stop(d1)

    for fam, (np, cl, masq, ev_create, ev_delete) in fams.items():
        creates = {x[3]: x for x in records(d1, f"{ev_create} and dst port 30001")}
        deletes = {x[3]: x for x in records(d1, f"{ev_delete} and dst port 30001")}
        bad = []
        for c in closed[fam] + opened[fam]:
            pod, seen_addr, seen_port = c["answer"].split()
            x = creates.get(c["sport"])
            want_post = (masq if fam == 4 else "::", int(seen_port))
            if not x or x[2] != cl or x[4] != np or (x[6] if fam == 4 else "::", x[7]) != want_post or \
                    POD_ADDR.get(x[8] if fam == 4 else "", pod) != pod or x[9] != 80 or \
                    str(ipaddress.ip_address(seen_addr.removeprefix("::ffff:"))) != masq:
                bad.append((c, x))
        check(not bad, f"IPv{fam}: a create for each of the 70 connections, its pre- and post-NAT tuples as the "
                       f"client and the pods saw them ({len(creates)} creates; wrong {bad[:2]})")
        want = {c["sport"] for c in closed[fam]}
        held = {c["sport"] for c in opened[fam]}
        check(want <= set(deletes) and not held & set(deletes),
              f"IPv{fam}: a delete for each of the 60 closed connections ({len(want & set(deletes))}), none for "
              f"the 10 open ({len(held & set(deletes))})")
        # Each delete's packets and octets both ways: what the client sent and received, once the
        # TCP and IP headers of the packets counted are taken off.
        exact, over, wrong = counted(fam, closed[fam], lambda c: deletes[c["sport"]][10:] if c["sport"] in deletes
                                     else None)
        check(not wrong and len(over) <= 3,
              f"IPv{fam}: each delete's packets and octets both ways hold the client's request and the pod's answer: "
              f"{exact} of 60 to the byte, {len(over)} more (a retransmission: {over[:2]}), wrong: {wrong[:3]}")
    for vip, fam in (("10.96.0.10", 4), ("fd00:96::a", 6)):
        dns = f"proto udp and dst ip {vip} and dst port 53"
        made, ended = records(d1, f"{fams[fam][3]} and {dns}"), records(d1, f"{fams[fam][4]} and {dns}")
        check(len(made) == 1 and len(ended) == 1 and made[0][2:6] == ended[0][2:6],
              f"the DNS query to {vip}: its create and delete, one each ({made + ended})")
        hdr = 28 if fam == 4 else 48  # IP and UDP headers
        sizes = dns_sizes[vip]
        check(sizes and len(ended) == 1 and ended[0][10:] == (1, 1, hdr + sizes[0], hdr + sizes[1]),
              f"the DNS query to {vip}: its delete counts one packet each way, the query's {sizes and sizes[0]} "
              f"bytes and the answer's {sizes and sizes[1]}, with their headers ({ended[0][10:] if ended else None})")
    pres = records(d1, "nat event = 4 and dst port 30002")
    check(len(pres) == 5 and all(x[6] == x[2] and x[7] == x[3] for x in pres),
          f"client_ip preserve: 5 creates, the post-NAT source the client's own ({[(x[6], x[7]) for x in pres][:2]})")
    created = metric(m, "svcgate_ipfix_events_total", 'event="create"') or 0
    # 140 connections through 30001, 5 through 30002, 2 DNS queries.
    check(metric(m, "svcgate_ipfix_events_dropped_total", 'reason="ring_full"') == 0 and created == 147,
          f"metrics: {created:.0f} creates exported, none dropped at the workers' rings")

    # The collector gone: connections go on, the refused messages are counted.
    before = metrics()
    got = client.go(20, "192.168.67.8", 30001)
    time.sleep(1.5)
    got += client.go(20, "192.168.67.8", 30001)
    time.sleep(1)
    after = metrics()
    failed = lambda t: metric(t, "svcgate_ipfix_messages_total", 'collector="127.0.0.1:9995",result="failed"') or 0  # noqa
    dropped = lambda t: metric(t, "svcgate_ipfix_events_dropped_total", 'reason="collector"') or 0  # noqa
    check(len(got) == 40 and failed(after) > failed(before) and dropped(after) > dropped(before) and
          metric(after, "svcgate_ipfix_events_dropped_total", 'reason="ring_full"') == 0,
          f"nfcapd stopped: 40 connections served, {failed(after) - failed(before):.0f} messages refused, "
          f"{dropped(after) - dropped(before):.0f} events counted as dropped, none at the workers' rings")
    # Back: the templates again, then the records.
    check(nfcapd_start(d2), "nfcapd started again")
    time.sleep(0.5)
    back = client.go(10, "192.168.67.8", 30001)
    time.sleep(1.5)
    nfcapd_stop(d2)
    got2 = {x[3] for x in records(d2, "nat event = 4 and dst port 30001")}
    check(len(back) == 10 and {c["sport"] for c in back} <= got2,
          f"nfcapd back: the 10 new connections' creates are stored ({len(got2 & {c['sport'] for c in back})}), "
          "their templates sent again")

    # Top talkers during a SYN flood from three sources.
    flood = subprocess.Popen(["ip", "netns", "exec", "client", "/usr/bin/python3", "-c", """
from scapy.all import IP, TCP, send
import random
pkts = [IP(src=f'192.168.67.{s}', dst='192.168.67.8') / TCP(sport=random.randint(1024, 65000), dport=30001, flags='S')
        for s in (201, 202, 203) for n in range((4 - (s - 200)) * 150)]
send(pkts, verbose=0)
"""])
    flood.wait(timeout=120)
    r = subprocess.run([ctl_bin, "--socket", sock, "flows", "--top", "5", "--by", "source", "--json"],
                       capture_output=True, text=True, timeout=30)
    top = json.loads(r.stdout) if r.returncode == 0 else []
    names = [t["key"] for t in top]
    check(names[:3] == ["192.168.67.201", "192.168.67.202", "192.168.67.203"],
          f"flows --top 5 --by source during a SYN flood from 3 sources names them first: {[(t['key'], t['flows']) for t in top]}")
    r = subprocess.run([ctl_bin, "--socket", sock, "flows", "--top", "3", "--by", "endpoint"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0 and "ENDPOINT" in r.stdout and re.search(r"10\.244\.\d+\.\d+:80 ", r.stdout),
          f"flows --top 3 --by endpoint: {r.stdout.strip().splitlines()[1:2]}")
    r = subprocess.run([ctl_bin, "--socket", sock, "status"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and re.search(r"IPv4 \d+ of \d+, [\d.]+% full; IPv6 \d+ of \d+", r.stdout),
          "svcgatectl status shows each family's table and its fill")

    # Over TCP: the same records through a stream that libfixbuf's ipfixDump decodes, the IPv6
    # post-NAT addresses among them, and the templates again on a new connection.
    sinks = []
    start_sink = lambda: sinks.append(subprocess.Popen(  # noqa: E731
        ["ip", "netns", "exec", "gw", "/usr/bin/python3", "-c", TCP_SINK, work, f"sink{len(sinks)}"]))
    start_sink()
    cfg["export"]["ipfix"] = {"collectors": ["127.0.0.1:4740"], "transport": "tcp"}
    with open(cfg_path, "w") as f:
        yaml.safe_dump(cfg, f)
    client.close()
    client = None
    r = checks.lab(src, f"lab_stop_gateway; lab_start_gateway {svcgate} {cfg_path}")
    check(r.returncode == 0, f"svcgate restarted with transport: tcp ({(r.stderr or '').strip()[-300:]})")
    client = Client()
    over_tcp = {4: client.go(5, "192.168.67.8", 30001), 6: client.go(5, "fd00:67::8", 30001)}
    # Their deletes: the closed flows' timeouts, then the ageing pass, which has the flows the state
    # file brought back to visit too.
    ends_in = lambda: os.path.exists(f"{work}/sink0-1") and sum(  # noqa: E731
        x.get("natEvent") in ("5", "2") and int(x.get("sourceTransportPort", 0)) in
        {c["sport"] for cs in over_tcp.values() for c in cs} for x in ipfix_dump(f"{work}/sink0-1")[0]) >= 10
    checks.wait(ends_in, 20, step=0.5)
    sinks[0].terminate()  # the collector's end of the connection closed
    sinks[0].wait(timeout=10)
    start_sink()
    # Events after the close: a send into the closed connection may still succeed (the collector's
    # host answers it with a reset), a later one fails; the exporter reconnects a second after.
    client.go(3, "192.168.67.8", 30001)
    time.sleep(5)  # their creates, then their deletes (1 s timeouts, the 2 s ageing pass) sent
    after = client.go(5, "192.168.67.8", 30001)
    time.sleep(1)
    recs1, tmpl1 = ipfix_dump(f"{work}/sink0-1") if os.path.exists(f"{work}/sink0-1") else ([], 0)
    recs2, tmpl2 = ipfix_dump(f"{work}/sink1-1") if os.path.exists(f"{work}/sink1-1") else ([], 0)
    for fam, conns in over_tcp.items():
        a = "IPv4" if fam == 4 else "IPv6"
        sport = lambda x: int(x.get("sourceTransportPort", 0))  # noqa: E731
        creates = {sport(x): x for x in recs1 if x.get("natEvent") == ("4" if fam == 4 else "1")}
        ends = {sport(x): x for x in recs1 if x.get("natEvent") == ("5" if fam == 4 else "2")}
        bad = []
        for c in conns:
            pod, seen_addr, seen_port = c["answer"].split()
            x, e = creates.get(c["sport"], {}), ends.get(c["sport"], {})
            post_src = str(ipaddress.ip_address(x.get(f"postNATSource{a}Address", "0.0.0.0")))
            if str(ipaddress.ip_address(seen_addr.removeprefix("::ffff:"))) != post_src or \
                    int(x.get("postNAPTSourceTransportPort", 0)) != int(seen_port) or \
                    POD_ADDR.get(str(ipaddress.ip_address(x.get(f"postNATDestination{a}Address", "0.0.0.0")))) != pod:
                bad.append((c, x.get(f"postNATSource{a}Address")))
        keys = ("packetDeltaCount", "reversePacketDeltaCount", "octetDeltaCount", "reverseOctetDeltaCount")
        exact, over, wrong = counted(fam, conns, lambda c: tuple(int(ends[c["sport"]].get(k, -1)) for k in keys)
                                     if c["sport"] in ends else None)
        check(tmpl1 >= 4 and not bad and not wrong and len(over) <= 1,
              f"over TCP, ipfixDump decodes {len(conns)} {a} creates and deletes: post-NAT addresses and ports as the "
              f"pods saw them ({tmpl1} templates; wrong: {bad[:2]}), packets and octets: {exact} to the byte, "
              f"{len(over)} more, wrong: {wrong[:2]}")
    got2 = {int(x.get("sourceTransportPort", 0)) for x in recs2 if x.get("natEvent") == "4"}
    check(tmpl2 >= 4 and {c["sport"] for c in after} <= got2,
          f"the collector's connection closed and accepted again: the templates first on the new one ({tmpl2}), "
          f"then the 5 later connections' creates ({len(got2 & {c['sport'] for c in after})})")
finally:
    if client:
        client.close()
    for p in locals().get("sinks", []):
        p.kill()
    nfcapd_stop(d1)
    nfcapd_stop(d2)
    checks.lab_end(src, cfg_path)
    shutil.rmtree(work, ignore_errors=True)

checks.finish("IPFIX NAT events and top talkers end to end")
