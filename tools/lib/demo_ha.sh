# tools/demo --gateways N (N >= 2): the HA lab of tools/lib/ha.sh shown working. Sourced by
# tools/demo after lab.sh, ha.sh and its check(); sets `failures`.
#   - requests from the client to the LoadBalancer IP spread over the N gateways (counted per
#     gateway from their flow counters, and per pod from the answers);
#   - one gateway killed with SIGKILL while requests run: the router's ECMP set shrinks (BFD),
#     new requests are all answered;
#   - the gateway started again: it rejoins the ECMP set and carries requests again.
demo_ha() {
    local n=$1 lb=192.168.100.10 i
    echo "== HA lab: client | router (BIRD, ECMP) | gw1..gw$n (svcgate + BIRD) | nodes and pods"
    ha_up "$n" >/dev/null || return 1
    ha_start "$n" || return 1
    local t
    t=$(ha_wait_paths 30 "$lb" "$n") || true
    echo "== the router's route to $lb, learned over BGP (after ${t:-?} s)"
    lab_x router ip route show "$lb" | sed 's/^/  /'
    [ "$(ha_paths "$lb")" = "$n" ]; check $? "the router has $n ECMP next hops for $lb"
    ha_birdc router show protocols | grep -E "^gw" | sed 's/^/  /'

    # Flows gateway $1 created so far; nothing when the read fails (its error kept in
    # $LAB_RUN/created-gw$1.err, printed by a failed check).
    created() { { echo "-- read at $(date +%T.%N)"; } >>"$LAB_RUN/created-gw$1.err"
                "$LAB_SRC/build/control/svcgatectl" --socket "$LAB_RUN/gw$1.sock" stats --json 2>>"$LAB_RUN/created-gw$1.err" |
                /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["flows"]["created"])' 2>>"$LAB_RUN/created-gw$1.err"
                local rc=("${PIPESTATUS[@]}")
                [ "${rc[0]}" = 0 ] || echo "svcgatectl exited with ${rc[0]}" >>"$LAB_RUN/created-gw$1.err"; }
    rm -f "$LAB_RUN"/created-gw*.err
    local before=() after=()
    for i in $(seq 1 "$n"); do before[$i]=$(created "$i"); done
    echo "== 90 requests: client → http://$lb/ (a new connection each)"
    for _ in $(seq 1 90); do ip netns exec client curl -s -m 3 "http://$lb/" || echo "(no answer)"; done >"$LAB_RUN/ha-spread.txt"
    sort "$LAB_RUN/ha-spread.txt" | uniq -c | sed 's/^/  per pod: /'
    local spread_ok=0
    for i in $(seq 1 "$n"); do
        after[$i]=$(created "$i")
        echo "  per gateway: gw$i carried $((after[i] - before[i]))"
        [ -n "${before[i]}" ] && [ -n "${after[i]}" ] && [ $((after[i] - before[i])) -ge $((90 / n / 3)) ] || {
            spread_ok=1
            echo "  gw$i's flows created: before '${before[i]}', after '${after[i]}'; $(grep -v '^ \|^Traceback' "$LAB_RUN/created-gw$i.err" | tr '\n' ' ')"
        }
    done
    [ "$spread_ok" = 0 ] || ha_state "$n"
    [ "$(grep -c '^test-pod-[123]$' "$LAB_RUN/ha-spread.txt")" = 90 ]; check $? "90 of 90 requests answered"
    check $spread_ok "every gateway carried a share of them"

    local victim=2
    echo "== requests every 50 ms; gw$victim killed with SIGKILL in the middle"
    ( for _ in $(seq 1 120); do
          printf '%s %s\n' "$(date +%s.%N)" "$(ip netns exec client curl -s -m 1 "http://$lb/" || echo "(no answer)")"
          sleep 0.05
      done ) >"$LAB_RUN/ha-kill.txt" &
    local loop=$!
    sleep 2
    local killed_at
    killed_at=$(date +%s.%N)
    kill -9 "$(cat "$LAB_RUN/gw$victim.pid")"
    t=$(ha_wait_paths 5 "$lb" $((n - 1))) || t=
    echo "  the router's ECMP set went from $n to $((n - 1)) next hops in ${t:-more than 5} s"
    [ -n "$t" ] && [ "$(echo "$t < 1.5" | bc)" = 1 ]; check $? "the ECMP set shrank within BFD's second, 1.5 s at most (200 ms x 5)"
    lab_x router ip route show "$lb" | sed 's/^/  /'
    wait "$loop"
    local settled fails_after total_after
    settled=$(echo "$killed_at + ${t:-5}" | bc)
    total_after=$(awk -v s="$settled" '$1 > s' "$LAB_RUN/ha-kill.txt" | wc -l)
    fails_after=$(awk -v s="$settled" '$1 > s && $2 !~ /^test-pod/' "$LAB_RUN/ha-kill.txt" | wc -l)
    local fails_before
    fails_before=$(awk -v s="$settled" '$1 <= s && $2 !~ /^test-pod/' "$LAB_RUN/ha-kill.txt" | wc -l)
    echo "  $fails_before requests unanswered while BFD noticed; after that $((total_after - fails_after)) of $total_after answered"
    [ "$total_after" -gt 20 ] && [ "$fails_after" = 0 ]; check $? "every request after the ECMP set shrank was answered"

    echo "== gw$victim started again"
    ha_start_gateway "$victim" || return 1
    # Back means held: the route with all n next hops for 2 s, longer than BFD takes to drop it.
    t=$(ha_wait_stable 30 "$lb" "$n" 2) || t=
    echo "  back in the ECMP set after ${t:-more than 30} s, and held there"
    [ -n "$t" ]; check $? "gw$victim rejoined the ECMP set"
    before[$victim]=$(created "$victim")
    for _ in $(seq 1 60); do ip netns exec client curl -s -m 3 "http://$lb/" || echo "(no answer)"; done >"$LAB_RUN/ha-rejoin.txt"
    after[$victim]=$(created "$victim")
    local carried=$(( ${after[victim]:-0} - ${before[victim]:-0} )) paths
    paths=$(ha_paths "$lb")
    echo "  60 requests: $(grep -c '^test-pod' "$LAB_RUN/ha-rejoin.txt") answered, gw$victim carried $carried; $paths next hops after"
    [ "$(grep -c '^test-pod-[123]$' "$LAB_RUN/ha-rejoin.txt")" = 60 ] && [ -n "${before[victim]}" ] &&
        [ -n "${after[victim]}" ] && [ "$carried" -gt 0 ] && [ "$paths" = "$n" ]
    if ! check $? "after rejoining, gw$victim carries requests again and all are answered"; then
        tail -5 "$LAB_RUN/gw$victim.log" | sed 's/^/  gw: /'
        echo "  gw$victim's flows created: before '${before[victim]}', after '${after[victim]}'; $(grep -v '^ \|^Traceback' "$LAB_RUN/created-gw$victim.err" | tr '\n' ' ')"
        ha_state "$n"
    fi
}

# What a failed spread check needs to be understood, printed before the lab is torn down: the
# router's route, sessions and neighbours, the LAN bridge's forwarding table, and each gateway's
# ext port and flow counters.
ha_state() {
    local n=$1 i
    lab_x router ip route show 192.168.100.10 | sed 's/^/  route: /'
    ha_birdc router show protocols | grep -E "^gw" | sed 's/^/  bgp: /'
    lab_x router ip neigh show dev r-lan | sed 's/^/  neigh: /'
    lab_x lab-lan bridge fdb show br br0 | grep -v permanent | sed 's/^/  fdb: /'
    for i in $(seq 1 "$n"); do
        "$LAB_SRC/build/control/svcgatectl" --socket "$LAB_RUN/gw$i.sock" stats --json 2>&1 |
            /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["ports"], s["flows"], s["verdicts"])' 2>&1 |
            sed "s/^/  gw$i: /"
    done
}
