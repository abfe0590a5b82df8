#!/usr/bin/python3
"""An 802.1Q switch of a few ports in user space, for the VLAN lab (tests/e2e/vlan_e2e.py): one
trunk, and access ports each on one VLAN. A frame entering an access port leaves on the trunk
tagged with its VLAN; a tagged frame entering the trunk leaves, untagged, on the access port of
its VLAN, or is dropped when none has it. Nothing is learned: a switch of one trunk and one port
per VLAN has one place to send each frame.

usage: vlan_switch.py TRUNK VID=IFACE [VID=IFACE ...]      (run inside the lab's namespace)

Why in user space: a lab kernel may be built without 802.1Q (CONFIG_VLAN_8021Q), VLAN-filtering
bridges or tc's vlan action, as this project's CI host is. Linux takes a received frame's tag
off into the packet's metadata before a packet socket sees it (PACKET_AUXDATA gives it back); a
frame sent on a packet socket goes out as its bytes are, tag included.
"""
import select
import socket
import struct
import sys

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_OUTGOING = 4
TP_STATUS_VLAN_VALID = 1 << 4


def open_port(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    return s


def vlan_of(frame, ancdata):
    """The frame's VLAN ID and its bytes untagged: from the metadata the kernel moved the tag
    into, or from the frame itself; (None, frame) when it has none."""
    for level, kind, data in ancdata:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= 20:
            status, _, _, _, _, tci, _ = struct.unpack("=IIIHHHH", data[:20])
            if status & TP_STATUS_VLAN_VALID:
                return tci & 0xfff, frame
    if len(frame) >= 18 and frame[12:14] == b"\x81\x00":
        return struct.unpack("!H", frame[14:16])[0] & 0xfff, frame[:12] + frame[16:]
    return None, frame


def main():
    trunk = open_port(sys.argv[1])
    access = {}  # VLAN ID -> socket
    for arg in sys.argv[2:]:
        vid, _, iface = arg.partition("=")
        access[int(vid)] = open_port(iface)
    vid_of = {s: v for v, s in access.items()}
    socks = [trunk, *access.values()]
    print("vlan_switch: running", flush=True)
    while True:
        for s in select.select(socks, [], [])[0]:
            frame, ancdata, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(32))
            if addr[2] == PACKET_OUTGOING:
                continue
            if s is trunk:
                vid, bare = vlan_of(frame, ancdata)
                out = access.get(vid)
            else:
                _, bare = vlan_of(frame, ancdata)
                out, bare = trunk, bare[:12] + struct.pack("!HH", 0x8100, vid_of[s]) + bare[12:]
            try:
                if out:
                    out.send(bare)
            except OSError:  # a full queue or a frame past the link's MTU: dropped, as a switch would
                pass


if __name__ == "__main__":
    main()
