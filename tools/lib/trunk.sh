# The trunk lab (docs/operations.md, "A trunk"): the lab of tools/lib/lab.sh with the gateway's two
# networks as VLANs 10 and 20 over an LACP bond of two links, as a server's uplink to its
# top-of-rack switch. Sourced after lab.sh by tools/demo --trunk and tests/e2e/bond_e2e.py; svcgate
# runs on config/trunk.yaml.
#
#   gw: svcgate, bond "uplink" of TAPs gw-t0, gw-t1; ports ext (VLAN 10), cluster (VLAN 20)
#     ║ two links: gw-tN ⇄ (tc mirred) gw-mN ── veth ── cN ⇄ (tc mirred) sN
#   lab-tor, the switch: dpdk-testpmd, a mode-4 (802.3ad) bond of TAPs s0, s1, forwarding to tor-lag
#     ── veth ── tor-trunk: tests/support/vlan_switch.py, access ports to the client (VLAN 10:
#        the lab's gw-ext link, renamed tor-client) and to lab-switch (VLAN 20: gw-cl, tor-nodes)
#
# Each member is a TAP device on both sides (net_tap: its link is the TAP interface's state), so
# that taking both ends of a link down is a loss both bonds see, as a pulled cable is; the TAPs of
# a link are joined through a veth pair by tc (mirred: a bridge would keep LACP's frames, which go
# to a reserved group address). The switch is DPDK's own bond and a switch in user space because
# this host's kernel has neither a bonding driver nor 802.1Q. testpmd's io forwarding calls its
# bond's transmit only when it forwards something, and the driver sends LACP's frames in those
# calls: a frame every 50 ms on tor-trunk (VLAN 10, EtherType 0x88b5, which svcgate counts as
# ethertype_unknown) keeps it sending.

TRUNK_NS=lab-tor
LAB_EXTRA_NS+=("$TRUNK_NS")

# trunk_join NS TAP VETH: everything one receives leaves by the other; the kernel's IPv6 off both.
trunk_join() {
    lab_x "$1" sysctl -qw "net.ipv6.conf.$2.disable_ipv6=1" "net.ipv6.conf.$3.disable_ipv6=1"
    lab_x "$1" ip link set "$2" up
    local d
    for d in "$2" "$3"; do lab_x "$1" tc qdisc add dev "$d" clsact; done
    lab_x "$1" tc filter add dev "$2" ingress protocol all u32 match u32 0 0 action mirred egress redirect dev "$3"
    lab_x "$1" tc filter add dev "$3" ingress protocol all u32 match u32 0 0 action mirred egress redirect dev "$2"
}

# lab_trunk_up: after lab_up (and lab_start_apps), before the gateway starts: the switch side.
lab_trunk_up() {
    local t=$TRUNK_NS i
    ip netns add $t || return 1
    lab_x $t ip link set lo up
    ip -n gw link set gw-ext netns $t && ip -n gw link set gw-cl netns $t || return 1
    lab_x $t ip link set gw-ext name tor-client
    lab_x $t ip link set gw-cl name tor-nodes
    lab_link gw gw-m0 $t c0
    lab_link gw gw-m1 $t c1
    lab_link $t tor-lag $t tor-trunk
    for i in tor-client tor-nodes; do lab_x $t ip link set $i up; done
    lab_x $t /usr/bin/python3 "$LAB_SRC/tests/support/vlan_switch.py" tor-trunk 10=tor-client 20=tor-nodes \
        >"$LAB_RUN/vlan_switch.log" 2>&1 &
    echo $! >"$LAB_RUN/vlan_switch.pid"
    lab_x $t dpdk-testpmd --no-pci --no-huge -m 256 --file-prefix=svcgate-lab-lag -l 0,1 \
        --vdev net_tap_s0,iface=s0 --vdev net_tap_s1,iface=s1 \
        --vdev net_bonding_lag,mode=4,slave=net_tap_s0,slave=net_tap_s1,xmit_policy=l34 \
        --vdev net_af_packet2,iface=tor-lag -- --forward-mode=io --portmask=0xc --stats-period=3600 \
        --total-num-mbufs=8192 >"$LAB_RUN/testpmd.log" 2>&1 </dev/null &
    echo $! >"$LAB_RUN/testpmd.pid"
    lab_x $t /usr/bin/python3 -c '
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("tor-trunk", 0))
f = b"\xff" * 6 + bytes.fromhex("020000000099") + struct.pack("!HHH", 0x8100, 10, 0x88b5) + bytes(46)
while True:
    s.send(f)
    time.sleep(0.05)
' >/dev/null 2>&1 &
    echo $! >"$LAB_RUN/trickle.pid"
    for _ in $(seq 1 100); do
        grep -q running "$LAB_RUN/vlan_switch.log" && grep -q "start packet forwarding" "$LAB_RUN/testpmd.log" && break
        sleep 0.1
    done
    grep -q running "$LAB_RUN/vlan_switch.log" || { echo "trunk: the VLAN switch did not start" >&2; return 1; }
    grep -q "start packet forwarding" "$LAB_RUN/testpmd.log" ||
        { echo "trunk: testpmd did not start:" >&2; cat "$LAB_RUN/testpmd.log" >&2; return 1; }
    trunk_join $t s0 c0 && trunk_join $t s1 c1
}

# lab_trunk_join_gateway: after svcgate has made its TAPs (config/trunk.yaml), each joined to its veth.
lab_trunk_join_gateway() {
    trunk_join gw gw-t0 gw-m0 && trunk_join gw gw-t1 gw-m1
}

# lab_trunk_wait_lacp [SECONDS]: until both members collect and distribute, as svcgatectl says.
lab_trunk_wait_lacp() {
    local i ctl="$LAB_SRC/build/control/svcgatectl --socket $LAB_RUN/svcgate.sock"
    for i in $(seq 1 $((${1:-20} * 10))); do
        [ "$($ctl status 2>/dev/null | grep -c 'active; LACP actor active,aggregatable,in_sync,collecting,distributing, partner active,aggregatable,in_sync,collecting,distributing')" = 2 ] && return 0
        sleep 0.1
    done
    return 1
}

# The switch's programs go with lab_stop_apps (their pid files), its namespace with lab_down
# (LAB_EXTRA_NS); testpmd's run-time directory here.
lab_trunk_down() {
    rm -rf /var/run/dpdk/svcgate-lab-lag
}
