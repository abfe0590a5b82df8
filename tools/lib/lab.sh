# The dual-stack lab of README.md and docs/ipv6.md in network namespaces; sourced by tools/lab,
# tools/demo and the end-to-end tests. Every IPv4 address has its ULA mirror: 192.168.67.X ->
# fd00:67::X, 10.192.0.X -> fd00:192::X, pod 10.244.N.X -> fd00:244:N::X, and the Services'
# fd00:96::/108. No duplicate address detection and no router advertisements: addresses are
# usable at once. Link-local addresses stay (a Linux router solicits for forwarded packets from
# its link-local address); what the hosts send to link-local or multicast groups beyond Neighbor
# Discovery reaches svcgate as counted drops (ip6_scope, ip6_multicast). Nothing here is reachable
# from the root namespace: every address lives in a namespace this file creates, and the only
# links are veth pairs between those namespaces.
#
#   client (192.168.67.100, fd00:67::100) ── gw-ext ┐
#                                     [gw: svcgate on net_af_xdp]
#                  lab-switch (br0) ── gw-cl ┘
#                    ├── kube-node-1 10.192.0.3, cni0 10.244.2.1/24: coredns .2, test-pod-1 .4, test-pod-2 .6
#                    └── kube-node-2 10.192.0.4, cni0 10.244.3.1/24: lab-sleeper .5, test-pod-3 .6
#
# Nodes send everything that is not theirs (other pod CIDRs, the service CIDR) to the gateway.

LAB_NS=(client gw lab-switch kube-node-1 kube-node-2 coredns test-pod-1 test-pod-2 lab-sleeper test-pod-3)
LAB_PODS=("coredns kube-node-1 10.244.2.2" "test-pod-1 kube-node-1 10.244.2.4" "test-pod-2 kube-node-1 10.244.2.6"
          "lab-sleeper kube-node-2 10.244.3.5" "test-pod-3 kube-node-2 10.244.3.6")
LAB_HA_NS=()  # tools/lib/ha.sh's namespaces, when it is sourced
LAB_EXTRA_NS=()  # another lab's (tools/lib/trunk.sh), when it is sourced
LAB_RUN=/run/svcgate-lab
LAB_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

lab_x() { ip netns exec "$@"; }

lab_nooffload() {  # ns dev: veth checksum offload leaves partial checksums a capture would pass on
    lab_x "$1" ethtool -K "$2" tx off rx off >/dev/null 2>&1 || true
}

lab_link() {  # nsA devA nsB devB
    ip link add "tmp-a$$" type veth peer name "tmp-b$$"
    ip link set "tmp-a$$" netns "$1"
    ip link set "tmp-b$$" netns "$3"
    lab_x "$1" ip link set "tmp-a$$" name "$2"
    lab_x "$3" ip link set "tmp-b$$" name "$4"
    for side in "$1 $2" "$3 $4"; do
        set -- $side
        lab_x "$1" sysctl -qw "net.ipv6.conf.$2.accept_dad=0" "net.ipv6.conf.$2.accept_ra=0" 2>/dev/null || true
        lab_nooffload "$1" "$2"
        lab_x "$1" ip link set "$2" up
    done
}

lab_hugepages() {  # svcgate runs as a multi-process primary so that dpdk-dumpcap can attach
    local f=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
    if [ "$(cat $f)" -lt 256 ]; then echo 256 > $f; fi
    if ! mount | grep -q 'type hugetlbfs'; then
        mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages
    fi
}

lab_down() {
    lab_stop_apps
    # Whatever else still runs inside a lab namespace goes too.
    for ns in "${LAB_NS[@]}" "${LAB_HA_NS[@]}" "${LAB_EXTRA_NS[@]}"; do
        local pids
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
    done
    for ns in "${LAB_NS[@]}" "${LAB_HA_NS[@]}" "${LAB_EXTRA_NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    # The lab gateway's hugepage files (--file-prefix=svcgate-lab): DPDK's multi-process primary
    # leaves them behind (svcgate-labmap_0 stayed after tools/test), and a file in
    # hugetlbfs holds its pages until it is removed.
    rm -f /dev/hugepages/svcgate-labmap_* 2>/dev/null || true
    rm -rf "$LAB_RUN"
}

lab_stop_apps() {
    if [ -d "$LAB_RUN" ]; then
        for p in "$LAB_RUN"/*.pid; do
            [ -f "$p" ] || continue
            kill "$(cat "$p")" 2>/dev/null || true
        done
        sleep 0.3
        for p in "$LAB_RUN"/*.pid; do
            [ -f "$p" ] || continue
            kill -9 "$(cat "$p")" 2>/dev/null || true
            rm -f "$p"
        done
    fi
}

lab_up() {
    lab_down
    mkdir -p "$LAB_RUN"
    for ns in "${LAB_NS[@]}"; do
        ip netns add "$ns"
        lab_x "$ns" ip link set lo up
        lab_x "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.default.accept_ra=0 2>/dev/null || true
    done
    # client LAN
    lab_link client eth0 gw gw-ext
    lab_x client ip addr add 192.168.67.100/24 dev eth0
    lab_x client ip addr add fd00:67::100/64 dev eth0 nodad
    lab_x client ip -6 route add default via fd00:67::8
    # the node network: a switch with the gateway and both nodes
    lab_cluster_up 10.192.0.2 fd00:192::2
    lab_link gw gw-cl lab-switch sw-gw
    lab_x lab-switch ip link set sw-gw master br0
    # the gateway's namespace: the ports belong to svcgate, not to the kernel (no addresses)
    lab_x gw sysctl -qw net.ipv4.ip_forward=0
    lab_hugepages
}

# The node network (lab-switch's br0), both nodes and their pods; the nodes' default route goes to
# gateway address $1 (IPv4) and $2 (IPv6). The gateways' links to br0 are their caller's.
lab_cluster_up() {
    local gw4=$1 gw6=$2
    lab_x lab-switch ip link add br0 type bridge mcast_snooping 0  # ND multicast flooded: no MLD in the lab
    lab_x lab-switch ip link set br0 up
    local i=1
    for node in kube-node-1 kube-node-2; do
        lab_link "$node" eth0 lab-switch "sw-n$i"
        lab_x "$node" ip addr add "10.192.0.$((i + 2))/24" dev eth0
        lab_x "$node" ip addr add "fd00:192::$((i + 2))/64" dev eth0 nodad
        lab_x "$node" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
        lab_x "$node" sysctl -qw net.ipv4.conf.all.rp_filter=0
        lab_x "$node" sysctl -qw net.ipv4.conf.default.rp_filter=0
        lab_x "$node" ip link add cni0 type bridge mcast_snooping 0
        lab_x "$node" ip addr add "10.244.$((i + 1)).1/24" dev cni0
        lab_x "$node" ip addr add "fd00:244:$((i + 1))::1/64" dev cni0 nodad
        lab_x "$node" ip link set cni0 up
        lab_x "$node" ip route add default via "$gw4"
        lab_x "$node" ip -6 route add default via "$gw6"
        i=$((i + 1))
    done
    for dev in sw-n1 sw-n2; do lab_x lab-switch ip link set "$dev" master br0; done
    # pods
    for p in "${LAB_PODS[@]}"; do
        set -- $p
        local pod=$1 node=$2 ip=$3
        lab_link "$pod" eth0 "$node" "v-$pod"
        lab_x "$node" ip link set "v-$pod" master cni0
        lab_x "$pod" ip addr add "$ip/24" dev eth0
        lab_x "$pod" ip addr add "$(lab_ip6 "$ip")/64" dev eth0 nodad
        lab_x "$pod" ip route add default via "${ip%.*}.1"
        lab_x "$pod" ip -6 route add default via "$(lab_ip6 "${ip%.*}.1")"
    done
}

# The big TXT record's text: 3,300 letters, a..z over and over.
lab_big_txt() {
    /usr/bin/python3 -c 'print("".join(chr(97 + i % 26) for i in range(3300)))'
}

lab_start_apps() {
    # An HTTP server per test pod that answers with its pod name; coredns is dnsmasq.
    for pod in test-pod-1 test-pod-2 test-pod-3; do
        local ip
        ip=$(lab_pod_ip "$pod")
        ip netns exec "$pod" /usr/bin/python3 "$LAB_SRC/tools/lib/podserver.py" "$pod" "$ip,$(lab_ip6 "$ip")" 80 \
            >"$LAB_RUN/$pod.log" 2>&1 &
        echo $! > "$LAB_RUN/$pod.pid"
    done
    # big.default.svc.cluster.local: a TXT record of lab_big_txt's 3,300 bytes, answered over UDP
    # up to EDNS 4096 (the answer leaves the pod fragmented).
    ip netns exec coredns dnsmasq --keep-in-foreground --no-resolv --no-hosts --conf-file=/dev/null \
        --listen-address=10.244.2.2 --listen-address=fd00:244:2::2 --bind-interfaces --pid-file= --user=root \
        --address=/test-svc.default.svc.cluster.local/10.107.169.79 \
        --address=/test-svc.default.svc.cluster.local/fd00:96::79 \
        --edns-packet-max=4096 --txt-record="big.default.svc.cluster.local,$(lab_big_txt)" \
        --log-facility="$LAB_RUN/coredns.log" --log-queries &
    echo $! > "$LAB_RUN/coredns.pid"
    # Ready when each server answers inside its own namespace.
    for pod in test-pod-1 test-pod-2 test-pod-3; do
        local ok=0
        for _ in $(seq 1 50); do
            if ip netns exec "$pod" curl -s -m 1 -o /dev/null "http://$(lab_pod_ip "$pod")/"; then ok=1; break; fi
            sleep 0.1
        done
        [ $ok = 1 ] || { echo "lab: the server in $pod did not start" >&2; return 1; }
    done
}

lab_ip6() {  # an IPv4 lab address -> its IPv6 mirror (docs/ipv6.md)
    local a b c d
    IFS=. read -r a b c d <<<"$1"
    case "$a.$b" in
        192.168) echo "fd00:$c::$d" ;;   # the same digits, read as hex: .100 -> ::100
        10.192) echo "fd00:192::$d" ;;
        10.244) echo "fd00:244:$c::$d" ;;
        *) return 1 ;;
    esac
}

lab_pod_ip() {  # pod name -> its address
    local want=$1 p
    for p in "${LAB_PODS[@]}"; do
        set -- $p
        if [ "$1" = "$want" ]; then echo "$3"; return 0; fi
    done
    return 1
}

# svcgate in namespace gw on the lab config; waits until it runs. Arguments: binary, config,
# then EAL arguments (passed after --). (ip netns exec execs the
# program, so $! is svcgate's own pid.)
lab_start_gateway() {
    local bin=${1:-$LAB_SRC/build/control/svcgate} cfg=${2:-$LAB_SRC/config/lab.yaml}
    shift 2 2>/dev/null || shift $#
    ip netns exec gw "$bin" --config "$cfg" ${1:+--} "$@" >"$LAB_RUN/svcgate.log" 2>&1 &
    echo $! > "$LAB_RUN/svcgate.pid"
    for _ in $(seq 1 100); do
        grep -q "svcgate: running" "$LAB_RUN/svcgate.log" 2>/dev/null && return 0
        kill -0 "$(cat "$LAB_RUN/svcgate.pid")" 2>/dev/null || break
        sleep 0.1
    done
    echo "svcgate did not start:" >&2
    cat "$LAB_RUN/svcgate.log" >&2
    return 1
}

lab_stop_gateway() {
    local pidf=$LAB_RUN/svcgate.pid
    [ -f "$pidf" ] || return 0
    kill -INT "$(cat "$pidf")" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$(cat "$pidf")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$pidf")" 2>/dev/null || true
    rm -f "$pidf"
}
