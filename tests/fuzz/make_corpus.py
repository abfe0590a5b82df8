#!/usr/bin/python3
"""Writes the fuzzers' seed corpora: tests/fuzz/corpus/pipeline (one frame per file, addressed to
what fuzz_pipeline.cpp's config serves, or a sequence of frames: b"SGSQ" then each frame as a
16-bit big-endian length and its bytes) and tests/fuzz/corpus/config (the example configs).
Rerun after changing either; the seeds are committed."""
import hashlib
import hmac
import os
import shutil
import socket
import struct

here = os.path.dirname(os.path.abspath(__file__))
src = os.path.join(here, "..", "..")


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ip4(a):
    return socket.inet_aton(a)


def ipv4(src_, dst, proto, payload, ttl=64):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, ttl, proto, 0, ip4(src_), ip4(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload


def l4(proto, src_, dst, hdr, off):
    pseudo = ip4(src_) + ip4(dst) + struct.pack("!BBH", 0, proto, len(hdr))
    c = csum(pseudo + hdr)
    return hdr[:off] + struct.pack("!H", c) + hdr[off + 2:]


def tcp(s, sp, d, dp, flags, seq=1000, ack=0):
    return ipv4(s, d, 6, l4(6, s, d, struct.pack("!HHIIBBHHH", sp, dp, seq, ack, 5 << 4, flags, 65535, 0, 0), 16))


def udp(s, sp, d, dp, data=b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"):
    return ipv4(s, d, 17, l4(17, s, d, struct.pack("!HHHH", sp, dp, 8 + len(data), 0) + data, 6))


def sctp(s, sp, d, dp):
    return ipv4(s, d, 132, struct.pack("!HHII", sp, dp, 0, 0) + b"\x01\x00\x00\x14" + bytes(16))


def icmp(s, d, typ, code, rest, data):
    m = struct.pack("!BBHI", typ, code, 0, rest) + data
    return ipv4(s, d, 1, m[:2] + struct.pack("!H", csum(m)) + m[4:])


def ip6(a):
    return socket.inet_pton(socket.AF_INET6, a)


def ipv6(src_, dst, nh, payload, hlim=64):
    return struct.pack("!IHBB", 6 << 28, len(payload), nh, hlim) + ip6(src_) + ip6(dst) + payload


def l4_6(proto, src_, dst, hdr, off):
    pseudo = ip6(src_) + ip6(dst) + struct.pack("!IxxxB", len(hdr), proto)
    c = csum(pseudo + hdr[:off] + b"\0\0" + hdr[off + 2:])
    return hdr[:off] + struct.pack("!H", c) + hdr[off + 2:]


def tcp6(s, sp, d, dp, flags, ext=b"", nh=6):
    """TCP over IPv6; `ext` is an extension-header chain whose first Next Header is `nh`."""
    seg = l4_6(6, s, d, struct.pack("!HHIIBBHHH", sp, dp, 1000, 0, 5 << 4, flags, 65535, 0, 0), 16)
    return ipv6(s, d, nh if ext else 6, ext + seg)


def udp6(s, sp, d, dp, data=b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"):
    return ipv6(s, d, 17, l4_6(17, s, d, struct.pack("!HHHH", sp, dp, 8 + len(data), 0) + data, 6))


def icmp6(s, d, typ, code, rest, data, hlim=64):
    return ipv6(s, d, 58, l4_6(58, s, d, struct.pack("!BBHI", typ, code, 0, rest) + data, 2), hlim)


def eth(payload, etype=0x0800, vlan=None):
    h = bytes.fromhex("020000000001") + bytes.fromhex("020000000002")
    if vlan is not None:
        h += struct.pack("!HH", 0x8100, vlan)
    return h + struct.pack("!H", etype) + payload


def arp(sender, target):
    return eth(struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, bytes.fromhex("020000000002"), ip4(sender),
                           bytes(6), ip4(target)), 0x0806)


def frag4(packet, size, order, ident=7, shift=None):
    """The IPv4 packet's fragments (data of `size` bytes, a multiple of 8), as frames in `order`;
    `shift` = (k, bytes): fragment k's offset moved back (an overlap)."""
    hdr, data = packet[:20], packet[20:]
    out = []
    for k, off in enumerate(range(0, len(data), size)):
        chunk = data[off:off + size]
        more = off + size < len(data)
        o = off - (shift[1] if shift and shift[0] == k else 0)
        h = bytearray(hdr)
        struct.pack_into("!HHH", h, 2, 20 + len(chunk), ident, (o // 8) | (0x2000 if more else 0))
        h[10:12] = b"\0\0"
        h[10:12] = struct.pack("!H", csum(bytes(h)))
        out.append(eth(bytes(h) + chunk))
    return [out[k] for k in order]


def frag6(packet, size, order, ident=8):
    """The IPv6 packet's fragments behind a Fragment header, as frames in `order`."""
    nh, data = packet[6], packet[40:]
    out = []
    for off in range(0, len(data), size):
        chunk = data[off:off + size]
        more = off + size < len(data)
        fh = struct.pack("!BBHI", nh, 0, off | (1 if more else 0), ident)
        h = bytearray(packet[:40])
        struct.pack_into("!H", h, 4, 8 + len(chunk))
        h[6] = 44
        out.append(eth(bytes(h) + fh + chunk, 0x86DD))
    return [out[k] for k in order]


def df(packet):
    """The IPv4 packet with Don't Fragment set."""
    h = bytearray(packet[:20])
    h[6:8] = b"\x40\0"
    h[10:12] = b"\0\0"
    h[10:12] = struct.pack("!H", csum(bytes(h)))
    return bytes(h) + packet[20:]


def seq(frames):
    return b"SGSQ" + b"".join(struct.pack("!H", len(f)) + f for f in frames)


SYN, SYNACK, ACK = 0x02, 0x12, 0x10
translated_syn = tcp("10.192.0.2", 1024, "10.244.2.4", 80, SYN)
seeds = {
    "nodeport-syn": eth(tcp("192.168.67.100", 40000, "192.168.67.8", 30001, SYN)),
    "clusterip-syn": eth(tcp("10.244.2.9", 40000, "10.96.0.20", 80, SYN)),
    "lb-syn": eth(tcp("192.168.1.1", 40000, "198.51.100.7", 80, SYN)),
    "external-ip-ack": eth(tcp("192.168.1.1", 40000, "198.51.100.9", 80, ACK)),
    "local-policy-syn": eth(tcp("192.168.67.100", 40000, "192.168.67.8", 30002, SYN)),
    "no-endpoints-syn": eth(tcp("10.244.2.9", 40000, "10.96.0.22", 80, SYN)),
    "pod-synack": eth(tcp("10.244.2.4", 80, "10.192.0.2", 1024, SYNACK)),
    "dns-query": eth(udp("10.244.2.9", 34361, "10.96.0.20", 53)),
    "nodeport-udp": eth(udp("192.168.67.100", 5353, "192.168.67.8", 30053)),
    "sctp-init": eth(sctp("10.244.2.9", 5000, "10.96.0.20", 9000)),
    "ping-gateway": eth(icmp("192.168.67.100", "192.168.67.8", 8, 0, 0x00010001, bytes(16))),
    "frag-needed": eth(icmp("10.192.0.3", "10.192.0.2", 3, 4, 1400, translated_syn)),
    "time-exceeded": eth(icmp("192.168.67.1", "192.168.67.8", 11, 0, 0,
                              tcp("192.168.67.8", 30001, "192.168.67.100", 40000, SYNACK)[:28])),
    "arp-request": arp("192.168.67.100", "192.168.67.8"),
    "vlan-syn": eth(tcp("192.168.67.100", 40000, "192.168.67.8", 30001, SYN), 0x0800, vlan=0xa000),  # priority tag
    "vlan-unknown": eth(tcp("192.168.67.100", 40000, "192.168.67.8", 30001, SYN), 0x0800, vlan=10),
    "routed": eth(tcp("10.244.2.9", 1, "10.244.2.4", 22, SYN)),
    # IPv6: the same paths, Neighbor Discovery, ICMPv6 errors, extension-header chains.
    "nodeport-syn6": eth(tcp6("fd00:67::100", 40000, "fd00:67::8", 30001, SYN), 0x86DD),
    "clusterip-syn6": eth(tcp6("fd00:244:2::9", 40000, "fd00:96::20", 80, SYN), 0x86DD),
    "lb-syn6": eth(tcp6("fd00:1::1", 40000, "2001:db8:100::7", 80, SYN), 0x86DD),
    "external-ip-ack6": eth(tcp6("fd00:1::1", 40000, "2001:db8:100::9", 80, ACK), 0x86DD),
    "local-policy-syn6": eth(tcp6("fd00:67::100", 40000, "fd00:67::8", 30002, SYN), 0x86DD),
    "no-endpoints-syn6": eth(tcp6("fd00:244:2::9", 40000, "fd00:96::22", 80, SYN), 0x86DD),
    "pod-synack6": eth(tcp6("fd00:244:2::4", 80, "fd00:192::2", 1024, SYNACK), 0x86DD),
    "dns-query6": eth(udp6("fd00:244:2::9", 34361, "fd00:96::20", 53), 0x86DD),
    "ping6-gateway": eth(icmp6("fd00:67::100", "fd00:67::8", 128, 0, 0x00010001, bytes(16)), 0x86DD),
    "neighbor-solicit": eth(icmp6("fd00:67::100", "ff02::1:ff00:8", 135, 0, 0,
                                  ip6("fd00:67::8") + bytes.fromhex("0101020000000002"), hlim=255), 0x86DD),
    "neighbor-advert": eth(icmp6("fd00:192::3", "fd00:192::2", 136, 0, 0x60000000,
                                 ip6("fd00:192::3") + bytes.fromhex("0201020000000003"), hlim=255), 0x86DD),
    "packet-too-big": eth(icmp6("fd00:192::3", "fd00:192::2", 2, 0, 1280,
                                tcp6("fd00:192::2", 1024, "fd00:244:2::4", 80, SYN)), 0x86DD),
    "ext-chain-syn6": eth(tcp6("fd00:67::100", 40000, "fd00:67::8", 30001, SYN,
                               ext=bytes([60, 0, 1, 4, 0, 0, 0, 0]) + bytes([6, 0, 1, 4, 0, 0, 0, 0]), nh=0), 0x86DD),
    "first-fragment6": eth(tcp6("fd00:67::100", 40000, "fd00:67::8", 30001, SYN,
                                ext=bytes([6, 0, 0, 1, 0, 0, 0, 42]), nh=44), 0x86DD),
    # Fragment sequences (one input, several frames): out of order, overlapping, repeated, to a
    # NodePort and as a pod's reply; and packets too big for the cluster port (MTU 1280).
    "frags-reversed": seq(frag4(udp("192.168.67.100", 5353, "192.168.67.8", 30053, bytes(2600)), 1200, [2, 1, 0])),
    "frags-middle-first": seq(frag4(udp("192.168.67.100", 5354, "192.168.67.8", 30053, bytes(2600)), 1200, [1, 0, 2])),
    "frags-overlap": seq(frag4(udp("192.168.67.100", 5355, "192.168.67.8", 30053, bytes(2600)), 1200, [0, 1, 2],
                               shift=(1, 8))),
    "frags-duplicate": seq(frag4(udp("192.168.67.100", 5356, "192.168.67.8", 30053, bytes(2000)), 1000, [1, 1, 0])),
    "frags6-reversed": seq(frag6(udp6("fd00:67::100", 5353, "fd00:67::8", 30053, bytes(2600)), 1200, [2, 1, 0])),
    "frags6-reply": seq(frag6(udp6("fd00:244:2::4", 53, "fd00:192::2", 1024, bytes(2600)), 1232, [1, 2, 0])),
    "too-big-df": eth(df(udp("192.168.67.100", 5357, "192.168.67.8", 30053, bytes(1400)))),
    "too-big6": eth(udp6("fd00:67::100", 5353, "fd00:67::8", 30053, bytes(1400)), 0x86DD),
    "routing-type0": eth(tcp6("fd00:67::100", 40000, "fd00:67::8", 30001, SYN,
                              ext=bytes([6, 2, 0, 1, 0, 0, 0, 0]) + ip6("fd00:67::9"), nh=43), 0x86DD),
}
out = os.path.join(here, "corpus", "pipeline")
os.makedirs(out, exist_ok=True)
for name, frame in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(frame)
cout = os.path.join(here, "corpus", "config")
os.makedirs(cout, exist_ok=True)
for name in ("lab.yaml", "kubernetes.yaml"):
    shutil.copy(os.path.join(src, "config", name), os.path.join(cout, name))

# The replication decoder's seeds (fuzz_sync.cpp): flow records of the Service in sync_fuzz_config.h, as bodies
# to seal (odd first byte) and as whole datagrams sealed with its key (even first byte).
def svc_id(name, proto, v6=False):
    h = 2166136261
    for c in (name + "/").encode() + bytes([proto]) + (b"6" if v6 else b""):
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def record4(sid, state, flags, src, sport, dst, dport, ep, epport, masq, mport, proto=6):
    key0 = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack(">HHB3x", sport, dport, proto)
    key1 = socket.inet_aton(ep) + socket.inet_aton(masq) + struct.pack(">HHB3x", epport, mport, proto)
    return struct.pack("<BBBBIIIQ", 4, 0, flags, state, sid, 0, 3, 0) + key0 + key1


def record6(sid, state, src, sport, dst, dport, ep, epport):
    a = lambda x: socket.inet_pton(socket.AF_INET6, x)
    key0 = a(src) + a(dst) + struct.pack(">HHB3x", sport, dport, 6)
    key1 = a(ep) + a(src) + struct.pack(">HHB3x", epport, sport, 6)
    return struct.pack("<BBBBIIIQ", 6, 0, 0, state, sid, 0, 1, 0) + key0 + key1


def affinity4(sid, client, pinned):
    key0 = socket.inet_aton(client) + struct.pack("<I", sid) + struct.pack(">HHB3x", 0, 0, 0xFE)
    return struct.pack("<BBBBIIIQ", 4, 1, 2, 0, sid, 10800, 0, pinned) + key0 + bytes(16)


def sealed(kind, count, body, epoch=7, seq=1):
    head = b"SGSY" + bytes([2, kind]) + struct.pack("<HIQQ", count, 0x01020304, epoch, seq)  # version 2, sender id
    mac = hmac.new(bytes([0x5A]) * 32, head + body, hashlib.sha512).digest()[:32]  # crypto_auth
    return head + body + mac


web = "default/web:http"
tcp_est = 3 | 0x40  # ESTABLISHED, reply seen
recs = [record4(svc_id(web, 6), tcp_est, 1, "192.168.67.100", 40000 + i, "192.168.67.8", 30001, "10.244.2.4", 80,
                "10.192.0.2", 1024 + i) for i in range(3)]
recs.append(record4(svc_id("default/web:dns", 17), 1, 1, "192.168.67.100", 5353, "10.107.169.79", 53, "10.244.2.4", 53,
                    "10.192.0.2", 2000, proto=17))
recs.append(record6(svc_id(web, 6, True), tcp_est, "fd00:67::100", 40000, "fd00:96::79", 80, "fd00:244:2::4", 80))
recs.append(affinity4(svc_id(web, 6), "192.168.67.100", (0x0AF40204 << 16) | 0x5000))
body = b"".join(recs)
sync_seeds = {
    "body-flows": b"\x01" + struct.pack("<H", len(recs)) + body,
    "body-hello": b"\x03" + struct.pack("<H", 0) + bytes([1, 10, 0, 0, 0]) + struct.pack("<QI", 7, 9) + bytes([1]) + bytes(10) + bytes([0xff, 0xff, 10, 192, 0, 12]),
    "dgram-flows": b"\x00" + sealed(1, len(recs), body),
    "dgram-hello": b"\x00" + sealed(2, 0, bytes([2, 0, 0, 0, 0]) + struct.pack("<QI", 0, 9) + bytes([0]), seq=9),
    "dgram-forged": b"\x00" + sealed(1, len(recs), body)[:-1] + b"\x00",
}
sout = os.path.join(here, "corpus", "sync")
os.makedirs(sout, exist_ok=True)
for name, b in sync_seeds.items():
    with open(os.path.join(sout, name), "wb") as f:
        f.write(b)
print(f"{len(seeds)} frames, 2 configs, {len(sync_seeds)} replication seeds")

# Watch streams (fuzz_watch.cpp): the example cluster's objects as ADDED and MODIFIED events, a
# BOOKMARK, an ERROR, a DELETED, a deep and an unknown event, and a line of garbage.
import json  # noqa: E402
import yaml  # noqa: E402

with open(os.path.join(src, "config", "k8s-objects.yaml")) as f:
    objs = [o for d in yaml.safe_load_all(f) if d for o in (d.get("items", [d]) if d.get("kind", "").endswith("List") else [d])]
events = [json.dumps({"type": "ADDED", "object": o}) for o in objs]
watch_seeds = {
    "added": "\n".join(events) + "\n",
    "modified-deleted": "\n".join(events[:2] + [e.replace('"ADDED"', '"MODIFIED"', 1) for e in events[:2]] +
                                  [e.replace('"ADDED"', '"DELETED"', 1) for e in events[:1]]) + "\n",
    "bookmark-error": json.dumps({"type": "BOOKMARK", "object": {"kind": "Service", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": "12345"}}}) + "\n" +
    json.dumps({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410,
                                            "reason": "Expired", "message": "too old resource version"}}) + "\n",
    "deep-unknown-garbage": '{"type": "ADDED", "object": ' + "[" * 80 + "]" * 80 + "}\n" +
    '{"type": "EXPLODED", "object": {}}\nthis is not JSON\n{"type": "ADDED", "object": {"kind": "Ser',
}
wout = os.path.join(here, "corpus", "watch")
os.makedirs(wout, exist_ok=True)
for name, t in watch_seeds.items():
    with open(os.path.join(wout, name), "w") as f:
        f.write(t)
print(f"{len(watch_seeds)} watch streams")
