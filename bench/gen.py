#!/usr/bin/python3
"""Inputs for the macro benchmarks: a capture of client packets and the svcgate config that serves them.

  gen.py pcap --flows N --services S --out F.pcap [--queues Q] [--family 4|6]
      N TCP flows, one 64-byte frame each (60 bytes in the capture, the FCS is the NIC's), from
      clients in 198.18.0.0/15 (RFC 2544's benchmark range) to the ClusterIPs 10.96.0.0 + 1..S on
      port 80, flow i to Service i % S. ACK-only segments: the first pass over the capture picks
      each connection up (conntrack's loose mode), every later pass is an established flow. With
      --queues Q, Q files F.0.pcap ... each with every Q-th flow (one per receive queue).
      --family 6: the same flows over IPv6, 78-byte frames (74 in the capture: IPv6's header is
      20 bytes longer), clients in 2001:2::/48 (RFC 5180's benchmark range), ClusterIPs
      fd00:96:: + 1..S.
      --nodeport: the same flows to the NodePorts instead (the node IP 10.0.0.1, port 30000 + i % S;
      IPv4): kube-proxy masquerades them under externalTrafficPolicy Cluster, so each packet is
      SNATed and DNATed.

  gen.py replies --requests STEM --queues W --flows-json F --placement same|cross --out OUT
      The two directions of the connections of the W captures STEM.0.pcap ... (pcap --queues W,
      IPv4): the pods' replies as svcgate translated their requests (F: `svcgatectl flows --json`
      of a gateway that saw them: each reply from its endpoint to the client, or to the masquerade
      address and port). OUT.q.pcap holds queue q's requests, each followed by the reply of a
      connection whose request is on queue q (same) or on queue q + 1 mod W (cross: a reply on
      another queue, so another worker, than its request, as RSS puts a translated reply).

  gen.py config --services S --device DEV --socket S --out F.yaml [--eal 'ARGS'] [--workers W]
                [--flows N] [--mbufs M] [--family 4|6] [--state-file F]
      One port (10.0.0.1/24, fd00::1/64), one-armed: clients via 10.0.0.254 / fd00::fe, pods
      (10.128.0.0/10, fd00:128::/64) via 10.0.0.2 / fd00::2, all pinned as neighbors; S Services x
      3 endpoints of the given family, the flow table of that family sized for N flows; no cluster
      CIDR, so no masquerade of ClusterIP traffic (the OVN load balancer of the peer benchmark does
      DNAT only, too). Up to 2,000 Services each get the NodePort 30000 + i (the --nodeport
      capture's, masqueraded), so one config serves both paths. --state-file: flow_table.state_file
      (the flows a stop writes and the next start reads back).

  gen.py iptables|nft --services S --out F
      kube-proxy's own rule layout for the same Services (iptables: KUBE-SERVICES / KUBE-SVC-* /
      KUBE-SEP-* with statistic-mode random; nftables: the service-ips verdict map, one chain
      per service and endpoint with numgen random), for iptables-restore / nft -f.

  gen.py ovs --services S --out F
      The same Services as an OVN-style load balancer for Open vSwitch: F.groups (one select
      group per Service, buckets ct(commit,nat(dst=endpoint))) and F.flows (ct(nat) for every
      packet, +new to a VIP to its group, out of the input port), for ovs-ofctl -O OpenFlow15.
"""
import argparse
import ipaddress
import json
import struct
import sys

CLIENT_BASE = int(ipaddress.IPv4Address("198.18.0.1"))
VIP_BASE = int(ipaddress.IPv4Address("10.96.0.0"))
POD_BASE = int(ipaddress.IPv4Address("10.128.0.0"))
CLIENT6_BASE = int(ipaddress.IPv6Address("2001:2::1"))
VIP6_BASE = int(ipaddress.IPv6Address("fd00:96::"))
POD6_BASE = int(ipaddress.IPv6Address("fd00:128::"))
SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000002")


def ip(n):
    return str(ipaddress.IPv4Address(n)) if n < 1 << 32 else str(ipaddress.IPv6Address(n))


def vip(i, family=4):
    return (VIP_BASE if family == 4 else VIP6_BASE) + i + 1


def endpoint(i, k, family=4):
    return (POD_BASE if family == 4 else POD6_BASE) + 3 * i + k + 1


def csum_fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def frame(src, dst, sport, dport):
    iph = struct.pack("!BBHHHBBHII", 0x45, 0, 40, 0, 0x4000, 64, 6, 0, src, dst)
    words = struct.unpack("!10H", iph)
    iph = iph[:10] + struct.pack("!H", ~csum_fold(sum(words)) & 0xFFFF) + iph[12:]
    seq, ack, off_flags, win = 1, 1, (5 << 12) | 0x10, 65535
    pseudo = (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + 6 + 20
    s = pseudo + sport + dport + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF) + off_flags + win
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq, ack, off_flags, win, ~csum_fold(s) & 0xFFFF, 0)
    f = DST_MAC + SRC_MAC + b"\x08\x00" + iph + tcp
    return f + b"\x00" * (60 - len(f))


def frame6(src, dst, sport, dport):
    s16, d16 = src.to_bytes(16, "big"), dst.to_bytes(16, "big")
    iph = struct.pack("!IHBB", 6 << 28, 20, 6, 64) + s16 + d16
    seq, ack, off_flags, win = 1, 1, (5 << 12) | 0x10, 65535
    pseudo = sum(struct.unpack("!16H", s16 + d16)) + 20 + 6
    s = pseudo + sport + dport + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF) + off_flags + win
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq, ack, off_flags, win, ~csum_fold(s) & 0xFFFF, 0)
    return DST_MAC + SRC_MAC + b"\x86\xdd" + iph + tcp


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for f in frames:
            out.write(struct.pack("<IIII", 0, 0, len(f), len(f)))
            out.write(f)


NODE_IP = int(ipaddress.IPv4Address("10.0.0.1"))


def flows(n, services, family=4, nodeport=False):
    for i in range(n):
        if nodeport:
            yield frame(CLIENT_BASE + i // 50000, NODE_IP, 10000 + i % 50000, 30000 + i % services)
        elif family == 4:
            yield frame(CLIENT_BASE + i // 50000, vip(i % services), 10000 + i % 50000, 80)
        else:
            yield frame6(CLIENT6_BASE + i // 50000, vip(i % services, 6), 10000 + i % 50000, 80)


def tagged(frames, vlan):
    """The frames with an 802.1Q tag of `vlan` (priority 0) before their EtherType; as they are for 0."""
    for f in frames:
        yield f[:12] + struct.pack("!HH", 0x8100, vlan) + f[12:] if vlan else f


def cmd_pcap(a):
    if a.queues == 1:
        write_pcap(a.out, tagged(flows(a.flows, a.services, a.family, a.nodeport), a.vlan))
        return
    all_frames = list(tagged(flows(a.flows, a.services, a.family, a.nodeport), a.vlan))
    stem = a.out[:-5] if a.out.endswith(".pcap") else a.out
    for q in range(a.queues):
        write_pcap(f"{stem}.{q}.pcap", all_frames[q::a.queues])


def read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    frames, at = [], 24
    while at + 16 <= len(data):
        n = struct.unpack_from("<I", data, at + 8)[0]
        frames.append(data[at + 16:at + 16 + n])
        at += 16 + n
    return frames


def cmd_replies(a):
    def endpoint_of(text):  # "10.128.0.2:8080" → (address, port)
        addr, port = text.rsplit(":", 1)
        return int(ipaddress.IPv4Address(addr)), int(port)

    reply = {}  # flow index → its reply frame
    for f in json.load(open(a.flows_json)):
        client = f["original"].split()[1]  # "tcp 198.18.0.1:10000 > 10.96.0.1:80"
        caddr, cport = endpoint_of(client)
        i = (caddr - CLIENT_BASE) * 50000 + cport - 10000
        eaddr, eport = endpoint_of(f["endpoint"])
        daddr, dport = endpoint_of(f["snat"]) if f.get("snat") else (caddr, cport)
        reply[i] = frame(eaddr, daddr, eport, dport)
    w = a.queues
    requests = [read_pcap(f"{a.requests}.{q}.pcap") for q in range(w)]
    shift = 1 if a.placement == "cross" else 0
    for q in range(w):
        src = (q + shift) % w  # the queue whose connections' replies this queue receives
        out = []
        for k, req in enumerate(requests[q]):
            out.append(req)
            if k < len(requests[src]) and k * w + src in reply:
                out.append(reply[k * w + src])
        write_pcap(f"{a.out}.{q}.pcap", out)
    missing = sum(len(r) for r in requests) - len(reply)
    if missing:
        sys.exit(f"gen.py replies: {missing} connections have no flow in {a.flows_json}")


def cmd_config(a):
    capacity = 1 << max(16, (2 * a.flows - 1).bit_length())
    out = [
        "# Generated by bench/gen.py: one-armed benchmark port, pinned next hops.",
        "dataplane:",
        f"  eal: [{', '.join(repr(x) for x in a.eal.split())}]",
        f"  workers: {a.workers}",
        f"  mbufs: {a.mbufs}" if a.mbufs else "",
        f"  ports: [{{name: p0, device: '{a.device}', addresses: [10.0.0.1/24, 'fd00::1/64']"
        + (f", vlan: {a.vlan}" if a.vlan else "") + (f", mtu: {a.mtu}" if a.mtu else "") + "}]",
        "  routes:",
        "    - {prefix: 0.0.0.0/0, via: 10.0.0.254}",
        "    - {prefix: 10.128.0.0/10, via: 10.0.0.2}",
        "    - {prefix: '::/0', via: 'fd00::fe'}",
        "    - {prefix: 'fd00:128::/64', via: 'fd00::2'}",
        "  neighbors:",
        "    - {ip: 10.0.0.254, mac: '02:00:00:00:00:fe'}",
        "    - {ip: 10.0.0.2, mac: '02:00:00:00:00:02'}",
        "    - {ip: 'fd00::fe', mac: '02:00:00:00:00:fe'}",
        "    - {ip: 'fd00::2', mac: '02:00:00:00:00:02'}",
        # The family under test gets the table sized for its flows; the other the least there is.
        f"  flow_table: {{capacity: {capacity if a.family == 4 else 1 << 16}, capacity_v6: {capacity if a.family == 6 else 1024}"
        + (f", state_file: {a.state_file}" if a.state_file else "") + "}",
        "control:",
        f"  socket: {a.socket}",
        "  metrics: ''",
        "  watch: false",
        "cluster:",
        "  node_name: bench",
        "  node_ips: [10.0.0.1, 'fd00::1']",
        "  service_cidrs: [10.96.0.0/12, 'fd00:96::/108']",
        f"  client_ip: {a.client_ip}",
        "services:",
    ]
    for i in range(a.services):
        eps = ", ".join(repr(ip(endpoint(i, k, a.family))) for k in range(3))
        np = a.services <= 2000
        node_port = f", node_port: {30000 + i}" if np else ""
        out.append(f"  - {{name: b{i % 100}/s{i},{' type: NodePort,' if np else ''} cluster_ip: '{ip(vip(i, a.family))}', "
                   f"ports: [{{name: http, port: 80, target_port: 8080{node_port}}}], endpoints: [{eps}]}}")
    with open(a.out, "w") as f:
        f.write("\n".join(line for line in out if line) + "\n")


def cmd_iptables(a):
    # kube-proxy's iptables proxier layout (pkg/proxy/iptables/proxier.go), for a ClusterIP
    # Service with three endpoints and --cluster-cidr set.
    lines = ["*nat", ":KUBE-SERVICES - [0:0]", ":KUBE-MARK-MASQ - [0:0]", ":KUBE-POSTROUTING - [0:0]"]
    rules = []
    for i in range(a.services):
        svc = f"KUBE-SVC-{i:016X}"
        lines.append(f":{svc} - [0:0]")
        rules.append(f'-A KUBE-SERVICES -d {ip(vip(i))}/32 -p tcp -m comment --comment "b/s{i}:http cluster IP" '
                     f"-m tcp --dport 80 -j {svc}")
        rules.append(f'-A {svc} ! -s 10.128.0.0/10 -d {ip(vip(i))}/32 -p tcp -m comment --comment "b/s{i}:http '
                     f'cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ')
        for k in range(3):
            sep = f"KUBE-SEP-{i:014X}{k:02X}"
            lines.append(f":{sep} - [0:0]")
            e = ip(endpoint(i, k))
            if k < 2:
                rules.append(f'-A {svc} -m comment --comment "b/s{i}:http -> {e}:8080" -m statistic --mode random '
                             f"--probability {1 / (3 - k):.11f} -j {sep}")
            else:
                rules.append(f'-A {svc} -m comment --comment "b/s{i}:http -> {e}:8080" -j {sep}')
            rules.append(f'-A {sep} -s {e}/32 -m comment --comment "b/s{i}:http" -j KUBE-MARK-MASQ')
            rules.append(f'-A {sep} -p tcp -m comment --comment "b/s{i}:http" -m tcp -j DNAT --to-destination {e}:8080')
    rules.append("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000")
    rules.append("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN")
    rules.append("-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0")
    rules.append("-A KUBE-POSTROUTING -j MASQUERADE --random-fully")
    with open(a.out, "w") as f:
        f.write("\n".join(lines + rules + ["COMMIT", ""]))


def cmd_nft(a):
    # kube-proxy's nftables proxier layout (pkg/proxy/nftables/proxier.go), in the transaction
    # form knftables writes: the service-ips verdict map, a service chain with numgen random, an
    # endpoint chain with dnat.
    t = "ip kube-proxy"
    out = [f"add table {t}",
           f"add chain {t} mark-for-masquerade",
           f"add rule {t} mark-for-masquerade mark set mark or 0x4000",
           f"add map {t} service-ips {{ type ipv4_addr . inet_proto . inet_service : verdict ; }}",
           f"add chain {t} services",
           f"add rule {t} services ip daddr . meta l4proto . th dport vmap @service-ips",
           f"add chain {t} nat-prerouting {{ type nat hook prerouting priority -100 ; }}",
           f"add rule {t} nat-prerouting jump services"]
    elems = []
    for i in range(a.services):
        svc = f"service-{i:08X}-b/s{i}/tcp/http"
        eps = [(f"endpoint-{i:07X}{k}-b/s{i}/tcp/http__{ip(endpoint(i, k))}/8080", ip(endpoint(i, k))) for k in range(3)]
        for chain, e in eps:
            out += [f"add chain {t} {chain}",
                    f"add rule {t} {chain} ip saddr {e} jump mark-for-masquerade",
                    f"add rule {t} {chain} meta l4proto tcp dnat to {e}:8080"]
        vm = ", ".join(f"{k} : goto {chain}" for k, (chain, _) in enumerate(eps))
        out += [f"add chain {t} {svc}",
                f"add rule {t} {svc} ip daddr {ip(vip(i))} tcp dport 80 ip saddr != 10.128.0.0/10 jump mark-for-masquerade",
                f"add rule {t} {svc} numgen random mod 3 vmap {{ {vm} }}"]
        elems.append(f"{ip(vip(i))} . tcp . 80 : goto {svc}")
    for c in range(0, len(elems), 1000):
        out.append(f"add element {t} service-ips {{ " + ", ".join(elems[c:c + 1000]) + " }")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


def cmd_ovs(a):
    # OVN's load balancer, as ovn-northd lays it out for a logical switch: every IP packet through
    # ct(nat) first (established connections get their DNAT back), a new connection to a VIP to a
    # select group whose buckets commit it with nat(dst=endpoint), then out of the port it came
    # in on (one-armed, like svcgate's port), its MACs set as svcgate sets them.
    groups, flows = [], []
    for i in range(a.services):
        buckets = ",".join(f"bucket=bucket_id:{k},weight:100,actions=ct(commit,zone=1,table=2,"
                           f"nat(dst={ip(endpoint(i, k))}:8080))" for k in range(3))
        groups.append(f"group_id={i + 1},type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),{buckets}")
        flows.append(f"table=1,priority=100,ct_state=+new+trk,tcp,nw_dst={ip(vip(i))},tp_dst=80,actions=group:{i + 1}")
    flows += [
        "table=0,priority=100,ip,actions=ct(table=1,zone=1,nat)",
        "table=0,priority=0,actions=drop",
        "table=1,priority=50,ct_state=+trk-inv,actions=resubmit(,2)",
        "table=1,priority=0,actions=drop",
        "table=2,priority=0,actions=mod_dl_src:02:00:00:00:00:01,mod_dl_dst:02:00:00:00:00:02,dec_ttl,in_port",
    ]
    with open(a.out + ".groups", "w") as f:
        f.write("\n".join(groups) + "\n")
    with open(a.out + ".flows", "w") as f:
        f.write("\n".join(flows) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pc = sub.add_parser("pcap")
    pc.add_argument("--flows", type=int, required=True)
    pc.add_argument("--services", type=int, required=True)
    pc.add_argument("--queues", type=int, default=1)
    pc.add_argument("--family", type=int, choices=(4, 6), default=4)
    pc.add_argument("--nodeport", action="store_true")
    pc.add_argument("--vlan", type=int, default=0, help="every frame tagged with this VLAN ID")
    pc.add_argument("--out", required=True)
    cf = sub.add_parser("config")
    cf.add_argument("--services", type=int, required=True)
    cf.add_argument("--device", required=True)
    cf.add_argument("--workers", type=int, default=1)
    cf.add_argument("--flows", type=int, default=4096)
    cf.add_argument("--mbufs", type=int, default=0)
    cf.add_argument("--family", type=int, choices=(4, 6), default=4)
    cf.add_argument("--socket", required=True)
    cf.add_argument("--eal", default="", help="EAL arguments, one string")
    cf.add_argument("--state-file", default="")
    cf.add_argument("--client-ip", choices=("masquerade", "preserve"), default="masquerade",
                    help="cluster.client_ip: preserve DNATs the NodePort capture only")
    cf.add_argument("--vlan", type=int, default=0, help="the port on this VLAN of its device (a trunk)")
    cf.add_argument("--mtu", type=int, default=0, help="the port's MTU (over 2030: the jumbo pool)")
    cf.add_argument("--out", required=True)
    rp = sub.add_parser("replies")
    rp.add_argument("--requests", required=True, help="STEM of STEM.q.pcap")
    rp.add_argument("--queues", type=int, required=True)
    rp.add_argument("--flows-json", required=True)
    rp.add_argument("--placement", choices=("same", "cross"), required=True)
    rp.add_argument("--out", required=True, help="STEM of OUT.q.pcap")
    for name in ("iptables", "nft", "ovs"):
        x = sub.add_parser(name)
        x.add_argument("--services", type=int, required=True)
        x.add_argument("--out", required=True)
    a = p.parse_args()
    {"pcap": cmd_pcap, "config": cmd_config, "replies": cmd_replies, "iptables": cmd_iptables, "nft": cmd_nft, "ovs": cmd_ovs}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
