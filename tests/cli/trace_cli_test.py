#!/usr/bin/python3
"""svcgatectl trace as a user runs it: the issue's acceptance command in both families, --pcap
in/out (IPv6 frames too), stdin mode, and clear errors for a broken config or packet."""
import json
import os
import subprocess
import sys
import tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

ctl, src = sys.argv[1], sys.argv[2]
lab = os.path.join(src, "config", "lab.yaml")


def trace(*args, stdin=None):
    return subprocess.run([ctl, "trace", *args], capture_output=True, text=True, input=stdin, timeout=60)


# The acceptance command: NodePort SYN → DNAT to a test-pod :80 with masquerade; the pod's reply
# to the SNAT address and port comes out as VIP → client.
r = trace("--config", lab, "--json", "tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]")
check(r.returncode == 0, f"trace exits 0 ({r.stderr.strip()})")
first = json.loads(r.stdout.splitlines()[0])
check(first["verdict"] == "dnat", "first packet is DNATed")
check(first["endpoint"] in {"10.244.2.4:80", "10.244.2.6:80", "10.244.3.6:80"}, f"endpoint {first['endpoint']} is a test-pod on port 80")
check(first["masquerade"] is True, "NodePort traffic is masqueraded")
check(first["service"] == "default/test-svc:http", "service is named namespace/name:port")
check(first["port"] == "cluster", "leaves by the cluster port")
proto, src_ep, _, dst_ep = first["out"].split()
reply = f"tcp {dst_ep} > {src_ep} [S.]"
r = trace("--config", lab, "--json", "tcp 192.168.67.100:40000 > 192.168.67.8:30001 [S]", reply)
lines = [json.loads(x) for x in r.stdout.splitlines()]
check(len(lines) == 2 and lines[1]["verdict"] == "reply", "the pod's reply is recognised")
check(lines[1]["out"] == "tcp 192.168.67.8:30001 > 192.168.67.100:40000", f"reply translated back: {lines[1]['out']}")

# The same pair over IPv6 (the lab is dual-stack): the same verdicts and translation, IPv6
# addresses in RFC 5952 form, endpoints as [addr]:port; tcpdump's own form is taken too.
keys = ("verdict", "service", "role", "masquerade", "new_flow", "port")
r = trace("--config", lab, "--json", "tcp [fd00:67::100]:40000 > [fd00:67::8]:30001 [S]")
six = json.loads(r.stdout.splitlines()[0]) if r.returncode == 0 else {}
check(six and all(six[k] == first[k] for k in keys), f"IPv6 SYN: the IPv4 SYN's verdict and translation ({six})")
check(six.get("endpoint") in {"[fd00:244:2::4]:80", "[fd00:244:2::6]:80", "[fd00:244:3::6]:80"},
      f"IPv6 endpoint {six.get('endpoint')} is a test-pod on port 80, written [addr]:port")
check(six.get("out", "").startswith("tcp [fd00:192::2]:") and six["out"].endswith("> " + six.get("endpoint", "")),
      f"masqueraded to the cluster port's IPv6 address: {six.get('out')}")
_, src6, _, dst6 = six["out"].split()
# A line as tcpdump -n prints it, pasted whole.
r = trace("--config", lab, "--json", "12:00:00.000000 IP6 fd00:67::100.40000 > fd00:67::8.30001: Flags [S], seq 1, win 64800, "
          "options [mss 1440], length 0", f"tcp {dst6} > {src6} [S.]")
lines6 = [json.loads(x) for x in r.stdout.splitlines()]
check(len(lines6) == 2 and lines6[0]["verdict"] == "dnat" and lines6[1]["verdict"] == "reply" and
      all(lines6[1][k] == lines[1][k] for k in ("verdict", "service", "role", "port")),
      f"IPv6 reply recognised as the IPv4 one is ({[l['verdict'] for l in lines6]})")
check(len(lines6) == 2 and lines6[1]["out"] == "tcp [fd00:67::8]:30001 > [fd00:67::100]:40000",
      f"IPv6 reply translated back: {lines6[1]['out'] if len(lines6) == 2 else None}")
check(len(lines6) == 2 and set(lines6[0]) == set(lines[0]) and set(lines6[1]) == set(lines[1]),
      "the JSON has the same keys in both families")
r = trace("--config", lab, "--json", "IP 192.168.67.100.40002 > 192.168.67.8.30001: Flags [S], seq 1, length 0",
          "IP6 fd00:244:3::5.1000 > fd00:96::a.53: UDP, length 12", "IP6 fd00:67::100 > fd00:67::8: ICMP6, echo request, id 1, seq 1, length 64")
tl = [json.loads(x) for x in r.stdout.splitlines()]
check([l["verdict"] for l in tl] == ["dnat", "dnat", "local"] and tl[1]["endpoint"] == "[fd00:244:2::2]:53",
      f"tcpdump's lines of TCP, UDP and ICMPv6 are taken as they are printed ({[l['verdict'] for l in tl]})")
r = trace("--config", lab, "IP6 fd00:67::8 > fd00:67::100: ICMP6, echo reply, id 1, seq 1, length 64")
check(r.returncode != 0 and "only an ICMP echo request" in r.stderr, f"an ICMPv6 echo reply line is refused, not traced as a ping ({r.stderr.strip()})")
r = trace("--config", lab, "--json", "1700000000.000000 IP 192.168.67.100.40003 > 192.168.67.8.30001: Flags [S], seq 1, length 0",
          "2026-11-23 12:00:00.000000 IP 192.168.67.100.40004 > 192.168.67.8.30001: Flags [S], seq 1, length 0")
check(r.returncode == 0 and [json.loads(x)["verdict"] for x in r.stdout.splitlines()] == ["dnat", "dnat"],
      f"tcpdump -tt and -tttt timestamps are skipped ({r.stderr.strip()})")
r = trace("--config", lab, "IP6 fd00:67::100.1 > fd00:67::8.53: 1234+ A? example. (30)")
check(r.returncode != 0 and "write it as" in r.stderr, f"a tcpdump line of a decoded protocol asks for the spec form ({r.stderr.strip()})")

# L2: the lab's config pins no neighbor, so the SYN waits for kube-node's MAC (an ARP request
# goes out); with kube-node-1's MAC configured, packets behind it are sent to that MAC. The reply
# reaches the client directly on the ext port (no neighbor known there either).
l2 = first["l2"]
check(l2["outcome"] == "held" and l2["arp_request"] is True and l2["mac"] is None and
      l2["next_hop"] in {"10.192.0.3", "10.192.0.4"}, f"without a known next hop the packet waits for ARP: {l2}")
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write(open(lab).read().replace("dataplane:\n", "dataplane:\n  neighbors: [{ip: 10.192.0.3, mac: '02:aa:00:00:00:03'}]\n", 1))
pinned = f.name
r = trace("--config", pinned, "--json", *[f"tcp 192.168.67.100:{p} > 192.168.67.8:30001 [S]" for p in range(41000, 41030)])
recs = [json.loads(x) for x in r.stdout.splitlines()]
sent = [x for x in recs if x["endpoint"].startswith("10.244.2.")]
held = [x for x in recs if x["endpoint"].startswith("10.244.3.")]
check(sent and all(x["l2"] == {"outcome": "sent", "next_hop": "10.192.0.3", "mac": "02:aa:00:00:00:03",
                               "arp_request": False, "reason": None} for x in sent),
      f"behind a known next hop: sent to its MAC ({len(sent)} packets; {sent[0]['l2'] if sent else None})")
check(held and all(x["l2"]["outcome"] == "held" and x["l2"]["next_hop"] == "10.192.0.4" for x in held),
      f"behind an unknown one: held for ARP ({len(held)} packets)")
r = trace("--config", lab, "--json", "icmp 192.168.67.100 > 192.168.67.8", "tcp 192.168.67.100:1 > 192.168.67.8:22 [S]")
ping, ssh = [json.loads(x) for x in r.stdout.splitlines()]
check(ping["verdict"] == "local" and ping["l2"]["outcome"] == "sent" and ping["out"] == "icmp 192.168.67.8 > 192.168.67.100",
      f"a ping of the gateway is answered by the output stage: {ping['out']} {ping['l2']}")
check(ssh["l2"]["outcome"] == "dropped" and ssh["l2"]["reason"] == "to_gateway",
      f"other traffic to the gateway is dropped at L2 as to_gateway: {ssh['l2']}")

# stdin mode, with the reply shortcut.
r = trace("--config", lab, "--json", "-", stdin="tcp 192.168.67.100:40001 > 192.168.67.8:30001 [S]\nreply 1 [S.]\n")
lines = [json.loads(x) for x in r.stdout.splitlines()]
check([l["verdict"] for l in lines] == ["dnat", "reply"], "stdin packets traced in order")

# --pcap IN --out OUT: feed the generated output back in as a capture.
with tempfile.TemporaryDirectory() as d:
    out1, out2 = os.path.join(d, "a.pcap"), os.path.join(d, "b.pcap")
    r = trace("--config", lab, "--out", out1, "tcp 10.244.3.5:1000 > 10.96.0.10:53 [S]", "udp 10.244.3.5:1000 > 10.96.0.10:53")
    check(r.returncode == 0 and os.path.getsize(out1) > 24, "--out writes a capture")
    r = trace("--config", lab, "--json", "--pcap", out1, "--out", out2)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    check(len(lines) == 2, "--pcap reads every packet")
    # The DNATed packets are now addressed to coredns itself: routed, not translated again.
    check(all(l["verdict"] == "forward" for l in lines), f"pod-addressed packets are forwarded: {[l['verdict'] for l in lines]}")

    # IPv6 frames in and out: a capture of IPv6 packets traced as the IPv4 one.
    in6, out6 = os.path.join(d, "c.pcap"), os.path.join(d, "d.pcap")
    r = trace("--config", lab, "--out", in6, "tcp [fd00:244:3::5]:1000 > [fd00:96::a]:53 [S]",
              "udp [fd00:244:3::5]:1000 > [fd00:96::a]:53")
    r = trace("--config", lab, "--json", "--pcap", in6, "--out", out6)
    lines6 = [json.loads(x) for x in r.stdout.splitlines()]
    check(r.returncode == 0 and len(lines6) == 2 and all(l["verdict"] == "forward" for l in lines6) and
          [l["out"] for l in lines6] == ["tcp [fd00:244:3::5]:1000 > [fd00:244:2::2]:53", "udp [fd00:244:3::5]:1000 > [fd00:244:2::2]:53"],
          f"--pcap with IPv6 frames: the DNATed packets read back, addressed to coredns ({[l.get('out') for l in lines6]})")
    shown = subprocess.run(["tcpdump", "-n", "-r", out6], capture_output=True, text=True).stdout
    check("IP6 fd00:244:3::5.1000 > fd00:244:2::2.53" in shown and shown.count("IP6") == 2,
          f"--out writes IPv6 frames tcpdump reads ({shown.strip().splitlines()})")

    # A datagram fragmented and captured out of order (last fragment first): every fragment
    # leaves translated to --out (the later ones when the first comes), and they reassemble to
    # the datagram DNATed with a right UDP checksum. IPv4 and IPv6.
    from scapy.all import IP, UDP, Ether, IPv6, IPv6ExtHdrFragment, Raw, fragment, fragment6, rdpcap, wrpcap, defragment  # noqa: E402
    for fam, pkt, frags in (
            ("IPv4", IP(src="10.244.3.5", dst="10.96.0.10", id=77) / UDP(sport=1000, dport=53) / Raw(bytes(range(256)) * 12), None),
            ("IPv6", IPv6(src="fd00:244:3::5", dst="fd00:96::a") / IPv6ExtHdrFragment(id=78) / UDP(sport=1000, dport=53) /
             Raw(bytes(range(256)) * 12), None)):
        frags = fragment(pkt, fragsize=1200) if fam == "IPv4" else fragment6(pkt, 1280)
        frags = [Ether(src="02:00:00:00:00:09", dst="02:00:00:00:00:02") / f for f in reversed(frags)]
        fin, fout = os.path.join(d, f"frag-{fam}.pcap"), os.path.join(d, f"frag-{fam}-out.pcap")
        wrpcap(fin, frags)
        r = trace("--config", lab, "--json", "--pcap", fin, "--out", fout)
        recs = [json.loads(x) for x in r.stdout.splitlines()]
        left = rdpcap(fout) if os.path.exists(fout) else []
        held = [x["l2"]["outcome"] for x in recs if x.get("l2")].count("fragment held")
        pod = "10.244.2.2" if fam == "IPv4" else "fd00:244:2::2"
        ip = IP if fam == "IPv4" else IPv6
        check(r.returncode == 0 and len(frags) >= 3 and held == len(frags) - 1 and len(left) == len(frags) and
              all(p[ip].dst == pod for p in left),
              f"trace --pcap of a {fam} datagram fragmented out of order: {len(frags) - 1} held, then all {len(left)} "
              f"of {len(frags)} fragments written to --out, to coredns")
        if fam == "IPv4":
            whole = defragment([p[IP] for p in left])
            whole = [p for p in whole if UDP in p]
        else:
            # scapy has no IPv6 reassembly that keeps the header: put the payload back together.
            parts = sorted(((p[IPv6ExtHdrFragment].offset * 8, bytes(p[IPv6ExtHdrFragment].payload)) for p in left))
            data = b"".join(b for _, b in parts)
            whole = [IPv6(src=left[0][IPv6].src, dst=left[0][IPv6].dst, nh=17) / UDP(data)] if parts else []
        ok = False
        if len(whole) == 1:
            u = whole[0][UDP]
            got = u.chksum
            u2 = UDP(bytes(u))
            del u2.chksum
            recomputed = (IP(src=whole[0].src, dst=whole[0].dst) / u2) if fam == "IPv4" else (
                IPv6(src=whole[0].src, dst=whole[0].dst) / u2)
            ok = UDP(bytes(recomputed[UDP])).chksum == got and u.dport == 53 and bytes(u.payload) == bytes(range(256)) * 12
        check(ok, f"{fam}: the fragments written reassemble to the DNATed datagram, UDP checksum right")

    # A frame too large for an mbuf is that packet's error; the packets after it still run.
    import struct
    big, small = os.path.join(d, "big.pcap"), out1
    frames = open(small, "rb").read()[24:]
    with open(big, "wb") as f:
        f.write(open(small, "rb").read()[:24])
        f.write(struct.pack("<IIII", 0, 0, 4000, 4000) + bytes(4000))
        f.write(frames)
    r = trace("--config", lab, "--json", "--pcap", big)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    check(r.returncode == 1 and "larger than an mbuf" in r.stderr and len(lines) == 2,
          f"an oversized frame is reported, the rest traced (rc {r.returncode}, {len(lines)} lines)")

# Errors: a broken config and a broken packet.
with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
    f.write("cluster:\n  node_ips: [not-an-ip]\n")
r = trace("--config", f.name, "tcp 1.1.1.1:1 > 2.2.2.2:2 [S]")
check(r.returncode != 0 and f"{f.name}:2:14" in r.stderr, f"bad config names file:line:col ({r.stderr.strip()})")
r = trace("--config", lab, "tcp 1.1.1.1 > 2.2.2.2:2 [S]")
check(r.returncode != 0 and "needs :port" in r.stderr, "bad packet spec is a clear error")

checks.finish("svcgatectl trace")
