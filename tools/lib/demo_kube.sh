# tools/demo --kube-api: the lab's Services and EndpointSlices come from an API server instead of
# files: the tests' own (tests/support/kube_apiserver.py, serving config/k8s-objects.yaml over
# HTTPS), inside namespace gw on its loopback, and svcgate follows it (config/kube-api.yaml with
# this kubeconfig). Sourced by tools/demo after tools/lib/lab.sh.

KUBE_DIR=$LAB_RUN/kube

# kube_api_up: the API server started, its kubeconfig and svcgate's config written; prints the
# config's path.
kube_api_up() {
    mkdir -p "$KUBE_DIR"
    ip netns exec gw /usr/bin/python3 "$LAB_SRC/tests/support/kube_apiserver.py" "$KUBE_DIR" \
        "$LAB_SRC/config/k8s-objects.yaml" >"$KUBE_DIR/server.log" 2>&1 &
    echo $! >"$KUBE_DIR/server.pid"
    for _ in $(seq 1 100); do
        grep -q "^serving" "$KUBE_DIR/server.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q "^serving" "$KUBE_DIR/server.log" || { cat "$KUBE_DIR/server.log" >&2; return 1; }
    sed "s|/etc/svcgate/kubeconfig|$KUBE_DIR/kubeconfig|" "$LAB_SRC/config/kube-api.yaml" >"$KUBE_DIR/svcgate.yaml"
    echo "$KUBE_DIR/svcgate.yaml"
}

kube_api_down() {
    [ -f "$KUBE_DIR/server.pid" ] && kill "$(cat "$KUBE_DIR/server.pid")" 2>/dev/null
    rm -f "$KUBE_DIR/server.pid"
}

# kube_put FILE: PUT the object in FILE (JSON) to the API server, as kubectl replace would.
kube_put() {
    local url path
    url=$(sed -n 's/^serving \(https:[^;]*\);.*/\1/p' "$KUBE_DIR/server.log")
    path=$(/usr/bin/python3 - "$1" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
m = o["metadata"]
base = "/api/v1" if o["kind"] == "Service" else "/apis/discovery.k8s.io/v1"
print(f"{base}/namespaces/{m.get('namespace', 'default')}/{o['kind'].lower()}s/{m['name']}")
PY
)
    ip netns exec gw curl -sf --cacert "$KUBE_DIR/ca.crt" -H "Authorization: Bearer test-token" \
        -H "Content-Type: application/json" -X PUT --data-binary @"$1" "$url$path" >/dev/null
}

# kube_get PATH: the object's JSON.
kube_get() {
    local url
    url=$(sed -n 's/^serving \(https:[^;]*\);.*/\1/p' "$KUBE_DIR/server.log")
    ip netns exec gw curl -sf --cacert "$KUBE_DIR/ca.crt" -H "Authorization: Bearer test-token" "$url$1"
}

# demo_kube_edit: with a keep-alive connection open from client to the NodePort, test-svc's IPv4
# EndpointSlice loses another pod on the API server. Checks (tools/demo's check): the published
# endpoints change within a second, new connections never reach the removed pod, and the open
# connection is answered by its pod again.
demo_kube_edit() {
    declare -A ip_of=([test-pod-1]=10.244.2.4 [test-pod-2]=10.244.2.6 [test-pod-3]=10.244.3.6)
    local ctl="ip netns exec gw build/control/svcgatectl --socket /run/svcgate-lab/svcgate.sock"
    echo
    echo "== an EndpointSlice edit on the API server, a keep-alive connection open meanwhile"
    rm -f "$KUBE_DIR"/kept.* "$KUBE_DIR/edited"
    ip netns exec client /usr/bin/python3 - "$KUBE_DIR" <<'PY' &
import http.client, os, sys, time
d = sys.argv[1]
c = http.client.HTTPConnection("192.168.67.8", 30001, timeout=10)
c.request("GET", "/")
open(f"{d}/kept.first", "w").write(c.getresponse().read().decode().strip())
end = time.monotonic() + 20
while not os.path.exists(f"{d}/edited") and time.monotonic() < end:
    time.sleep(0.05)
c.request("GET", "/")
open(f"{d}/kept.second", "w").write(c.getresponse().read().decode().strip())
PY
    local kept_pid=$!
    for _ in $(seq 1 100); do [ -s "$KUBE_DIR/kept.first" ] && break; sleep 0.1; done
    local first victim
    first=$(cat "$KUBE_DIR/kept.first" 2>/dev/null)
    for p in test-pod-1 test-pod-2 test-pod-3; do [ "$p" != "$first" ] && victim=$p && break; done
    echo "  open connection answered by ${first:-nobody}; removing ${victim} (${ip_of[$victim]}) from the slice"
    kube_get /apis/discovery.k8s.io/v1/endpointslices >"$KUBE_DIR/slices.json"
    /usr/bin/python3 - "$KUBE_DIR/slices.json" "${ip_of[$victim]}" "$KUBE_DIR/slice.json" <<'PY'
import json, sys
for o in json.load(open(sys.argv[1]))["items"]:  # test-svc's IPv4 slice, without the victim
    if o["metadata"]["labels"].get("kubernetes.io/service-name") == "test-svc" and o["addressType"] == "IPv4":
        o.update(kind="EndpointSlice", apiVersion="discovery.k8s.io/v1")
        o["endpoints"] = [e for e in o["endpoints"] if e["addresses"][0] != sys.argv[2]]
        json.dump(o, open(sys.argv[3], "w"))
PY
    local t0 t1 moved=1
    t0=$(date +%s.%N)
    kube_put "$KUBE_DIR/slice.json" || echo "  the PUT failed"
    for _ in $(seq 1 60); do
        if ! $ctl endpoints --json | grep -q "\"${ip_of[$victim]}:"; then moved=0; break; fi
        sleep 0.05
    done
    t1=$(date +%s.%N)
    local ms
    ms=$(awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}")
    if [ "$moved" = 0 ]; then echo "  published without ${ip_of[$victim]} after $ms ms"
    else echo "  still published with ${ip_of[$victim]} after $ms ms"; fi
    touch "$KUBE_DIR/edited"
    wait "$kept_pid"
    requests client http://192.168.67.8:30001/ >"$KUBE_DIR/after.txt"
    sort "$KUBE_DIR/after.txt" | uniq -c | sed 's/^/  /'
    [ "$moved" = 0 ] && [ "$ms" -le 1000 ]; check $? "the edit reached the dataplane within a second ($ms ms)"
    ! grep -q "^$victim\$" "$KUBE_DIR/after.txt" && [ "$(grep -c '^test-pod-[123]$' "$KUBE_DIR/after.txt")" = 30 ]
    check $? "30 new connections answered, none by the removed $victim"
    [ -n "$first" ] && [ "$(cat "$KUBE_DIR/kept.second" 2>/dev/null)" = "$first" ]
    check $? "the open connection survived the edit (answered by $first again)"
}

# demo_kube_lb: a LoadBalancer Service created with Debian's kubectl gets an address from the
# gateway's pool (kubernetes.load_balancer in config/kube-api.yaml), kubectl shows it as
# EXTERNAL-IP, and the client reaches the pods through it (the client LAN routes the pool to the
# gateway, as a router or BGP would). config/lb-service.yaml: the Service and its EndpointSlice
# (the tests' API server runs no controllers).
demo_kube_lb() {
    local kc="$KUBECTL --kubeconfig $KUBE_DIR/kubeconfig --cache-dir $KUBE_DIR/kubectl-cache"
    echo
    echo "== kubectl create: a LoadBalancer Service; svcgate gives it an address and serves it"
    ip netns exec client ip route replace 192.168.100.0/28 via 192.168.67.8
    local t0 t1 ip="" ms
    t0=$(date +%s.%N)
    ip netns exec gw $kc create -f "$LAB_SRC/config/lb-service.yaml" | sed 's/^/  /'
    for _ in $(seq 1 100); do
        ip=$(ip netns exec gw $kc get svc demo-lb -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null)
        [ -n "$ip" ] && break
        sleep 0.05
    done
    t1=$(date +%s.%N)
    ms=$(awk "BEGIN {printf \"%.0f\", ($t1 - $t0) * 1000}")
    ip netns exec gw $kc get svc demo-lb | sed 's/^/  /'
    [ -n "$ip" ]; check $? "kubectl get svc shows the EXTERNAL-IP svcgate gave ($ip, $ms ms after kubectl create)"
    local pool
    pool=$(ip netns exec gw $kc get svc demo-lb -o jsonpath='{.metadata.annotations.svcgate\.io/ip-allocated-from-pool}')
    [ "$pool" = lab ]; check $? "the Service names the pool it came from (svcgate.io/ip-allocated-from-pool: $pool)"
    for _ in $(seq 1 40); do  # published within min_sync_period (1 s)
        ip netns exec client curl -s -m 1 "http://$ip/" >/dev/null && break
        sleep 0.1
    done
    echo "== 30 requests: client → LoadBalancer http://$ip/"
    requests client "http://$ip/" >"$KUBE_DIR/lb.txt"
    sort "$KUBE_DIR/lb.txt" | uniq -c | sed 's/^/  /'
    [ "$(grep -c '^test-pod-[123]$' "$KUBE_DIR/lb.txt")" = 30 ] && [ "$(sort -u "$KUBE_DIR/lb.txt" | wc -l)" -ge 2 ]
    check $? "30 of 30 requests to the LoadBalancer address answered by the pods"
    ip netns exec gw $kc delete svc demo-lb | sed 's/^/  /'
    for _ in $(seq 1 40); do
        ip netns exec client curl -s -m 1 "http://$ip/" >/dev/null || break
        sleep 0.1
    done
    ! ip netns exec client curl -s -m 1 "http://$ip/" >/dev/null
    check $? "kubectl delete svc: the address is served no more"
}
