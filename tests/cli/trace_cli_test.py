#!/usr/bin/python3
"""svcgatectl trace as a user runs it: the issue's acceptance command, --pcap in/out, stdin mode,
and clear errors for a broken config or packet."""
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
