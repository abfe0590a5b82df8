# The HA lab of docs/ha.md, sourced after lab.sh: N gateways behind a router that spreads
# client connections over them by ECMP, the routes learned over BGP from BIRD on each gateway.
#
#   client 192.168.66.100 ── router (BIRD: BGP + BFD, kernel multipath, L4 hash)
#                              │ 192.168.67.1
#                       lab-lan (br0)
#            ┌─────────────────┼─────────────────┐
#   gw1 .8 (svcgate, BIRD)  gw2 .9 ( … )     gw3 .10 ( … )        ext ports; BIRD on sg-ext,
#            │                 │                 │                 the host interface
#   lab-switch (br0): gw1 10.192.0.2, gw2 .12, gw3 .13; kube-node-1 .3, kube-node-2 .4; pods
#
# Each address has its ULA mirror (fd00:66::, fd00:67::, fd00:192::). The Services of
# config/lab.yaml, plus default/test-lb (LoadBalancer 192.168.100.10 and fd00:100::10, policy
# Cluster) and default/local-lb (192.168.100.11, fd00:100::11, policy Local, healthCheckNodePort
# 32100, one endpoint on node "svcgate", the gateways' node name) and default/preserve-lb
# (192.168.100.12, fd00:100::12, policy Cluster with client_ip preserve: the pods see the client).
# Each gateway masquerades to its own cluster-side address, so replies come back to the gateway
# that carries the connection; the preserved ones by the nodes' pinning (ha_node_pin).
#
# The gateways replicate their flows (svcgate's ha:) over a sync link of their own: lab-sync (br0),
# gw1 10.193.0.11, gw2 .12, gw3 .13, UDP port 7400, the key in $LAB_RUN/ha.key (HA_SYNC=0: no
# replication, as before issue 19).
#
# Without replication (HA_SYNC=0), the router keeps an established connection on the gateway it
# started on (HA_PIN=1; nftables: the next hop ECMP chose for its first packet is saved in the
# connection's mark, later packets from the client follow the mark), as a stateful router or L4
# balancer in front of the gateways would: new connections are spread by the kernel's multipath
# route, so a gateway leaving the ECMP set (killed, or drained) moves only new connections, and a
# drained gateway keeps serving those it has. With replication the router does not pin (HA_PIN=0):
# Linux's hash-threshold multipath remaps part of the connections whenever the set changes, and
# the gateway they land on holds their replicas. Nothing here is reachable from the root
# namespace; BGP, BFD and the sync link run between namespaces of the lab only.

HA_MAX=8
LAB_HA_NS=(router lab-lan lab-sync)
for _i in $(seq 1 $HA_MAX); do LAB_HA_NS+=("gw$_i"); done
unset _i

ha_ext4() { echo "192.168.67.$((7 + $1))"; }
ha_ext6() { printf 'fd00:67::%x\n' $((7 + $1)); }
ha_cl4() { if [ "$1" = 1 ]; then echo 10.192.0.2; else echo "10.192.0.$((10 + $1))"; fi; }
ha_sync4() { echo "10.193.0.$((10 + $1))"; }
ha_cl6() { if [ "$1" = 1 ]; then echo fd00:192::2; else printf 'fd00:192::%x\n' $((16 + $1)); fi; }

ha_up() {  # N: namespaces, links, addresses (no programs yet)
    local n=$1 i
    lab_down
    mkdir -p "$LAB_RUN"
    echo "$n" > "$LAB_RUN/gateways"
    local all=(client router lab-lan lab-sync lab-switch kube-node-1 kube-node-2 coredns test-pod-1 test-pod-2 lab-sleeper test-pod-3)
    for i in $(seq 1 "$n"); do all+=("gw$i"); done
    for ns in "${all[@]}"; do
        ip netns add "$ns"
        lab_x "$ns" ip link set lo up
        lab_x "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.default.accept_ra=0 2>/dev/null || true
    done
    # client ── router
    lab_link client eth0 router r-client
    lab_x client ip addr add 192.168.66.100/24 dev eth0
    lab_x client ip addr add fd00:66::100/64 dev eth0 nodad
    lab_x client ip route add default via 192.168.66.1
    lab_x client ip -6 route add default via fd00:66::1
    lab_x router ip addr add 192.168.66.1/24 dev r-client
    lab_x router ip addr add fd00:66::1/64 dev r-client nodad
    # the gateways' LAN
    lab_x lab-lan ip link add br0 type bridge mcast_snooping 0
    lab_x lab-lan ip link set br0 up
    lab_link router r-lan lab-lan lan-r
    lab_x lab-lan ip link set lan-r master br0
    lab_x router ip addr add 192.168.67.1/24 dev r-lan
    lab_x router ip addr add fd00:67::1/64 dev r-lan nodad
    lab_x router sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
        net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
        net.ipv4.fib_multipath_hash_policy=1 net.ipv6.fib_multipath_hash_policy=1
    # the node network
    lab_cluster_up 10.192.0.2 fd00:192::2
    for i in $(seq 1 "$n"); do
        lab_link "gw$i" gw-ext lab-lan "lan-g$i"
        lab_x lab-lan ip link set "lan-g$i" master br0
        lab_link "gw$i" gw-cl lab-switch "sw-gw$i"
        lab_x lab-switch ip link set "sw-gw$i" master br0
        lab_x "gw$i" sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
    done
    # The sync link: kernel interfaces (svcgate's sync thread uses a UDP socket), a bridge of
    # their own, a fresh key for every lab.
    lab_x lab-sync ip link add br0 type bridge mcast_snooping 0
    lab_x lab-sync ip link set br0 up
    for i in $(seq 1 "$n"); do
        lab_link "gw$i" gw-sync lab-sync "sync-g$i"
        lab_x lab-sync ip link set "sync-g$i" master br0
        lab_x "gw$i" ip addr add "$(ha_sync4 "$i")/24" dev gw-sync
    done
    (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$LAB_RUN/ha.key")
    ha_node_pin "$n"
    # Replicating gateways serve each other's connections: the router need not pin them (and must
    # not: a pinned connection would follow a dead gateway).
    [ "${HA_PIN:-$([ "${HA_SYNC:-1}" = 1 ] && echo 0 || echo 1)}" = 1 ] && ha_pin "$n"
    return 0
}

# The nodes send a connection's replies back to the gateway that brought it: its first packet's
# source MAC (the gateway's cluster port) is saved in the connection's mark, and the pods' packets
# of that connection are routed by the mark (table 300+i: default via gateway i), as a node behind
# several gateways keeps a connection symmetric. Without it, the replies of connections that are
# not masqueraded (policy Local, pods' ClusterIP connections) would all go to the nodes' default
# gateway, gw1. When a gateway dies, the survivor that takes over its addresses gets its replies.
ha_node_pin() {
    local n=$1 i node map=""
    for i in $(seq 1 "$n"); do map+="02:19:20:00:00:0$i : $i, "; done
    for node in kube-node-1 kube-node-2; do
        for i in $(seq 1 "$n"); do
            lab_x "$node" ip rule add fwmark "$i" lookup $((300 + i)) pref 100
            lab_x "$node" ip -6 rule add fwmark "$i" lookup $((300 + i)) pref 100
            lab_x "$node" ip route add default via "$(ha_cl4 "$i")" table $((300 + i))
            lab_x "$node" ip -6 route add default via "$(ha_cl6 "$i")" table $((300 + i))
        done
        lab_x "$node" nft -f - <<EOF
table inet pin {
    chain pre {
        type filter hook prerouting priority mangle; policy accept;
        iifname "eth0" ct state new ct mark set ether saddr map { ${map%, } }
        iifname "cni0" ct mark != 0 meta mark set ct mark
    }
}
EOF
    done
}

# The router's connection pinning (see the top of this file): per gateway, mark i and table 200+i.
ha_pin() {
    local n=$1 i map4="" map6=""
    for i in $(seq 1 "$n"); do
        map4+="$(ha_ext4 "$i") : $i, "
        map6+="$(ha_ext6 "$i") : $i, "
        lab_x router ip rule add fwmark "$i" lookup $((200 + i)) pref 100
        lab_x router ip -6 rule add fwmark "$i" lookup $((200 + i)) pref 100
        lab_x router ip route add default via "$(ha_ext4 "$i")" table $((200 + i))
        lab_x router ip -6 route add default via "$(ha_ext6 "$i")" table $((200 + i))
    done
    lab_x router nft -f - <<EOF
table inet pin {
    chain pre {
        type filter hook prerouting priority mangle; policy accept;
        iifname "r-client" ct mark != 0 meta mark set ct mark
    }
    chain post {
        type filter hook postrouting priority mangle; policy accept;
        oifname "r-lan" ct state new meta nfproto ipv4 ct mark set rt ip nexthop map { ${map4%, } }
        oifname "r-lan" ct state new meta nfproto ipv6 ct mark set rt ip6 nexthop map { ${map6%, } }
    }
}
EOF
}

# Gateway i's svcgate config: the lab's (config/lab.yaml) with its own addresses, a host interface
# on the ext port, the announcement table, and the HA Services.
ha_config() {
    local i=$1 out=$LAB_RUN/gw$1.yaml
    local e4 e6 c4 c6
    e4=$(ha_ext4 "$i"); e6=$(ha_ext6 "$i"); c4=$(ha_cl4 "$i"); c6=$(ha_cl6 "$i")
    cat > "$out" <<EOF
# Gateway $i of the HA lab (tools/lib/ha.sh), written by ha_config.
dataplane:
  eal: [--no-pci, --no-huge, -m, '256', --file-prefix=svcgate-gw$i]
  workers: 1
  ports:
    - name: ext
      device: net_af_xdp0,iface=gw-ext
      addresses: [$e4/24, '$e6/64']
      mac: 02:67:00:00:00:0$i          # the same on every run (the router's neighbors, captures)
      host_interface: sg-ext       # BIRD's BGP and BFD, the health-check ports
    - name: cluster
      device: net_af_xdp1,iface=gw-cl
      addresses: [$c4/24, '$c6/64']
      mac: 02:19:20:00:00:0$i
  routes:
    - {prefix: 10.244.2.0/24, via: 10.192.0.3}
    - {prefix: 10.244.3.0/24, via: 10.192.0.4}
    - {prefix: 'fd00:244:2::/64', via: 'fd00:192::3'}
    - {prefix: 'fd00:244:3::/64', via: 'fd00:192::4'}
    - {prefix: 192.168.66.0/24, via: 192.168.67.1}     # the client network, behind the router
    - {prefix: 'fd00:66::/64', via: 'fd00:67::1'}
  flow_table: {capacity: 65536, capacity_v6: 16384}

control:
  socket: $LAB_RUN/gw$i.sock
  metrics: 127.0.0.1:9477
  watch: false

routing:
  table: 101        # BIRD's kernel protocol learns it and exports it over BGP
  # Not node_ips: they are on the router's own link here (a /128 of a connected subnet, via
  # itself, also fails Linux's IPv6 check that a multipath next hop is directly connected).
  announce: [load_balancer_ips, external_ips]

cluster:
  node_name: svcgate
  node_ips: [$e4, '$e6']
  cluster_cidrs: [10.244.0.0/16, 'fd00:244::/32']
  service_cidrs: [10.96.0.0/12, 'fd00:96::/108']
  nodeport_range: 30000-32767

EOF
    if [ "${HA_SYNC:-1}" = 1 ]; then
        local j peers=""
        for j in $(seq 1 "$(cat "$LAB_RUN/gateways")"); do
            [ "$j" = "$i" ] || peers+="${peers:+, }$(ha_sync4 "$j")"
        done
        cat >> "$out" <<EOF
ha:                 # flow replication between the gateways, over the sync link
  listen: $(ha_sync4 "$i"):7400
  peers: [$peers]
  key_file: $LAB_RUN/ha.key
  takeover_ports: [cluster]   # a survivor answers for this gateway's cluster addresses when it dies
  refresh_seconds: 3          # short, so that a lost datagram heals within the tests
  hello_ms: 100
  dead_after_ms: 600

EOF
    fi
    if [ "${HA_KUBE:-0}" = 1 ]; then
        cat >> "$out" <<EOF
kubernetes:         # the API server in the router's namespace (ha_kube_up); LoadBalancer addresses
  api: {kubeconfig: $HA_KUBE_DIR/kubeconfig, min_sync_period_ms: 1000}
  load_balancer:
    election: {namespace: svcgate-system, name: svcgate-lb}
    pools: [{name: ha, addresses: [192.168.100.64/28, 'fd00:100::40/124'], avoid_buggy_ips: true}]

EOF
    fi
    sed -n '/^services:/,$p' "$LAB_SRC/config/lab.yaml" >> "$out"
    # The three test pods, both families: the endpoints of the policy-Cluster load balancers.
    local pods
    pods=$(printf '      - {ip: %s, node: %s}\n' 10.244.2.4 kube-node-1 10.244.2.6 kube-node-1 10.244.3.6 kube-node-2 \
        "'fd00:244:2::4'" kube-node-1 "'fd00:244:2::6'" kube-node-1 "'fd00:244:3::6'" kube-node-2)
    cat >> "$out" <<EOF
  - name: default/test-lb
    type: LoadBalancer
    cluster_ips: [10.111.0.10, 'fd00:96::110']
    load_balancer_ips: [192.168.100.10, 'fd00:100::10']
    ports: [{name: http, protocol: TCP, port: 80, target_port: 80, node_port: 30010}]
    endpoints:
$pods
  - name: default/local-lb
    type: LoadBalancer
    cluster_ips: [10.111.0.11, 'fd00:96::111']
    load_balancer_ips: [192.168.100.11, 'fd00:100::11']
    external_traffic_policy: Local
    health_check_node_port: 32100
    ports: [{name: http, protocol: TCP, port: 80, target_port: 80, node_port: 30011}]
    endpoints:
      - {ip: 10.244.2.4, node: ${HA_LOCAL_NODE:-svcgate}}
      - {ip: 'fd00:244:2::4', node: ${HA_LOCAL_NODE:-svcgate}}
  - name: default/preserve-lb
    type: LoadBalancer
    cluster_ips: [10.111.0.12, 'fd00:96::112']
    load_balancer_ips: [192.168.100.12, 'fd00:100::12']
    client_ip: preserve   # the pods see the client: the nodes send replies back by ha_node_pin
    ports: [{name: http, protocol: TCP, port: 80, target_port: 80, node_port: 30012}]
    endpoints:
$pods
EOF
    echo "$out"
}

# BIRD on gateway i: the kernel table svcgate writes (learn), exported over BGP to the router with
# BFD, one session per family, TTL security (RFC 5082) so the host path counts them as on-link.
ha_bird_gw() {
    local i=$1 e4 e6
    e4=$(ha_ext4 "$i"); e6=$(ha_ext6 "$i")
    sed -e "s/@ID@/$e4/g" -e "s/@V4@/$e4/g" -e "s/@V6@/$e6/g" -e "s|@LOG@|$LAB_RUN/gw$i-bird.log|" \
        "$LAB_SRC/config/bird-gateway.conf" > "$LAB_RUN/gw$i-bird.conf"
}

ha_bird_router() {
    local n=$1 i
    {
        sed -e "s|@LOG@|$LAB_RUN/router-bird.log|" "$LAB_SRC/config/bird-router.conf"
        for i in $(seq 1 "$n"); do
            echo "protocol bgp gw${i} from gateways4 { neighbor $(ha_ext4 "$i") as 64513; }"
            echo "protocol bgp gw${i}_v6 from gateways6 { neighbor $(ha_ext6 "$i") as 64513; }"
        done
    } > "$LAB_RUN/router-bird.conf"
}

ha_bird_start() {  # namespace name
    local ns=$1
    lab_x "$ns" bird -c "$LAB_RUN/$ns-bird.conf" -s "$LAB_RUN/$ns-bird.ctl" -P "$LAB_RUN/$ns-bird.pid"
}

ha_birdc() {  # namespace, command...
    local ns=$1; shift
    birdc -s "$LAB_RUN/$ns-bird.ctl" "$@"
}

# svcgate on gateway i (and its BIRD once it runs: the host interface must exist first).
ha_start_gateway() {
    local i=$1 bin=${2:-$LAB_SRC/build/control/svcgate} cfg p
    cfg=$(ha_config "$i")
    # The gateway's old BIRD goes first, and is waited for: left running while the new svcgate
    # brings its host interface up, it could bring its BGP session up again and then, killed, take
    # it down under the new BIRD's feet: the router would hold the path back for its error wait
    # time (seconds) right after the demo saw it come back.
    if [ -f "$LAB_RUN/gw$i-bird.pid" ]; then
        p=$(cat "$LAB_RUN/gw$i-bird.pid")
        kill "$p" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
        rm -f "$LAB_RUN/gw$i-bird.pid"
    fi
    [ -f "$LAB_RUN/gw$i.log" ] && mv "$LAB_RUN/gw$i.log" "$LAB_RUN/gw$i.log.prev"
    ip netns exec "gw$i" "$bin" --config "$cfg" >"$LAB_RUN/gw$i.log" 2>&1 &
    echo $! > "$LAB_RUN/gw$i.pid"
    disown $! 2>/dev/null || true  # killing it (the tests do) is no news for the shell
    for _ in $(seq 1 100); do
        if grep -q "svcgate: running" "$LAB_RUN/gw$i.log" 2>/dev/null && lab_x "gw$i" ip link show sg-ext >/dev/null 2>&1; then
            # The kernel's own routes, for what it answers (health checks from the client network).
            lab_x "gw$i" ip route replace default via 192.168.67.1 dev sg-ext
            lab_x "gw$i" ip -6 route replace default via fd00:67::1 dev sg-ext
            ha_bird_gw "$i"
            ha_bird_start "gw$i"
            return 0
        fi
        kill -0 "$(cat "$LAB_RUN/gw$i.pid")" 2>/dev/null || break
        sleep 0.1
    done
    echo "svcgate on gw$i did not start:" >&2
    cat "$LAB_RUN/gw$i.log" >&2
    return 1
}

# HA_KUBE=1: the gateways also follow an API server, the tests' own (tests/support/kube_apiserver.py)
# in the router's namespace on 192.168.67.1:6443, which they reach over their host interfaces as
# BGP does, and hand out LoadBalancer addresses from the pool ha (192.168.100.64/28,
# fd00:100::40/124) with kubernetes.load_balancer, one of them elected to write.
HA_KUBE_DIR=$LAB_RUN/kube
ha_kube_up() {
    mkdir -p "$HA_KUBE_DIR"
    ip netns exec router /usr/bin/python3 "$LAB_SRC/tests/support/kube_apiserver.py" "$HA_KUBE_DIR" \
        --host 192.168.67.1 --port 6443 >"$HA_KUBE_DIR/server.log" 2>&1 &
    echo $! >"$LAB_RUN/kube-api.pid"
    for _ in $(seq 1 100); do
        grep -q "^serving" "$HA_KUBE_DIR/server.log" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$HA_KUBE_DIR/server.log" >&2
    return 1
}

ha_start() {  # N: the pods' servers, the router's BIRD, every gateway
    local n=$1 i
    lab_start_apps || return 1
    if [ "${HA_KUBE:-0}" = 1 ]; then ha_kube_up || return 1; fi
    ha_bird_router "$n"
    ha_bird_start router || return 1
    for i in $(seq 1 "$n"); do ha_start_gateway "$i" || return 1; done
    # Up once BGP has brought every gateway into the router's route.
    ha_wait_paths 30 192.168.100.10 "$n" >/dev/null || { echo "ha: the router did not learn $n paths" >&2; return 1; }
}

# Waits (bounded, seconds) until the router's route to $2 has $3 next hops; prints the seconds it took.
ha_wait_paths() {
    local limit=$1 dst=$2 want=$3 t0 now
    t0=$(date +%s.%N)
    while :; do
        [ "$(ha_paths "$dst")" = "$want" ] && { echo "$(echo "$(date +%s.%N) - $t0" | bc)"; return 0; }
        now=$(date +%s.%N)
        [ "$(echo "$now - $t0 > $limit" | bc)" = 1 ] && return 1
        sleep 0.05
    done
}

# The same, until the router has held `want` next hops for `hold` seconds without a break (a
# session that comes up and drops again is not back). Prints when the hold began.
ha_wait_stable() {  # limit dst want hold
    local limit=$1 dst=$2 want=$3 hold=$4 t0 now since=
    t0=$(date +%s.%N)
    while :; do
        now=$(date +%s.%N)
        if [ "$(ha_paths "$dst")" = "$want" ]; then
            since=${since:-$now}
            [ "$(echo "$now - $since >= $hold" | bc)" = 1 ] && { echo "$(echo "$since - $t0" | bc)"; return 0; }
        else
            since=
        fi
        [ "$(echo "$now - $t0 > $limit" | bc)" = 1 ] && return 1
        sleep 0.05
    done
}

# A rolling restart of gateways 1..N, one at a time: drain it (with replication it hands its
# connections to its peers and exits in seconds), start it again (it takes its peers' flows
# before it announces), and wait until the router has it back in the ECMP set of test-lb before
# the next. Prints each drain's and return's duration; fails (1) if a gateway does not leave within
# its drain's 60 s timeout + 10 s or does not come back within 30 s.
ha_rolling_restart() {  # N [svcgate binary]
    local n=$1 bin=${2:-$LAB_SRC/build/control/svcgate} i t0 left back lb=192.168.100.10
    for i in $(seq 1 "$n"); do
        t0=$(date +%s.%N)
        "$LAB_SRC/build/control/svcgatectl" --socket "$LAB_RUN/gw$i.sock" drain --timeout 60 >/dev/null || return 1
        left=
        for _ in $(seq 1 700); do
            kill -0 "$(cat "$LAB_RUN/gw$i.pid")" 2>/dev/null || { left=$(echo "$(date +%s.%N) - $t0" | bc); break; }
            sleep 0.1
        done
        [ -n "$left" ] || { echo "gw$i: still draining after 70 s" >&2; return 1; }
        grep "drained:" "$LAB_RUN/gw$i.log" | tail -1 | sed "s/^svcgate: /gw$i: /"
        ha_start_gateway "$i" "$bin" || return 1
        back=$(ha_wait_paths 30 "$lb" "$n") || { echo "gw$i: not back in the ECMP set after 30 s" >&2; return 1; }
        printf 'gw%s: drained in %.1f s, back in the ECMP set %.1f s after its start\n' "$i" "$left" "$back"
    done
}

ha_paths() {  # the number of next hops of the router's route to $1 (0: none)
    local fam=-4
    case $1 in *:*) fam=-6 ;; esac
    lab_x router ip "$fam" route show "$1" 2>/dev/null | grep -c "via" || true
}

ha_stop_gateway() {  # i [signal]
    local i=$1 sig=${2:-INT} p
    for p in "$LAB_RUN/gw$i.pid" "$LAB_RUN/gw$i-bird.pid"; do
        [ -f "$p" ] || continue
        kill "-$sig" "$(cat "$p")" 2>/dev/null || true
    done
    for _ in $(seq 1 50); do kill -0 "$(cat "$LAB_RUN/gw$i.pid" 2>/dev/null)" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$LAB_RUN/gw$i.pid" 2>/dev/null)" "$(cat "$LAB_RUN/gw$i-bird.pid" 2>/dev/null)" 2>/dev/null || true
    rm -f "$LAB_RUN/gw$i.pid" "$LAB_RUN/gw$i-bird.pid"
}
