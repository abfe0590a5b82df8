#!/usr/bin/python3
"""kubernetes.api end to end (issue 34): the daemon follows the tests' own API server
(tests/support/kube_apiserver.py) over HTTPS on loopback, with a net_null port (no traffic: what
is checked is what the daemon publishes, through `svcgatectl services` and `status`).

  - nothing from the API before both kinds have listed (kube-proxy's has-synced): status says not
    synced, /healthz answers 503 and the file's Service alone is served; then one publish;
  - LIST in pages (limit + continue): 250 more Services and slices arrive, each once;
  - an EndpointSlice edit reaches the published endpoints (and the programming histogram);
  - 410: the history compacted under an open watch -> relist, the same objects, none twice;
  - the server restarted with a new history -> reconnect, relist, the new state;
  - a stalled watch (no byte, no end) is cut and restarted;
  - bad input: not JSON, another kind, an unknown event type, an event cut mid-object, an object
    the reader refuses, a slice without its Service, labels the selector excludes: each counted
    under its reason, the good objects served;
  - a wrong token, a wrong CA: a clear error in status, the file's Service still served;
  - the gateway's own Node (fieldSelector) gives its zone for topology hints, a label change on the
    server chooses again; a ServiceCIDR joins the service CIDRs; a server without ServiceCIDRs
    (404) leaves that kind synced and empty;
  - an exec credential plugin, run again once its token expired;
  - kubectl accepts the kubeconfig the test writes (when kubectl is installed).

usage: kube_api_e2e.py SVCGATE"""
import copy
import datetime
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import checks  # noqa: E402
import kube_apiserver  # noqa: E402
from kube_gateway import Gateway, check, wait_for, now_rfc3339  # noqa: E402

svcgate = sys.argv[1]
FIXTURES = os.path.join(HERE, "..", "..", "config", "k8s-objects.yaml")


def main(d):
    srv = kube_apiserver.Server(d, bookmark_seconds=1.0)
    fixtures = kube_apiserver.load_objects(FIXTURES)
    for o in fixtures + kube_apiserver.generated(250):
        srv.put(o)
    api_services = {f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}"
                    for o in fixtures + kube_apiserver.generated(250) if o["kind"] == "Service"}
    kc = srv.kubeconfig(f"{d}/kubeconfig")

    if shutil.which("kubectl"):
        r = subprocess.run(["kubectl", "--kubeconfig", kc, "get", "--raw", "/api/v1/services?limit=1"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and json.loads(r.stdout or "{}").get("kind") == "ServiceList",
              "kubectl get --raw takes the test's kubeconfig and server", r.stderr)

    # --- has synced: the slices' LIST held -----------------------------------------------------
    srv.hold["endpointslices"] = threading.Event()
    gw = Gateway(svcgate, d, "gw", kc)
    try:
        check(gw.p.poll() is None, "the gateway starts with kubernetes.api", gw.log()[-2000:])
        wait_for(lambda: gw.api().get("kinds", {}).get("services", {}).get("synced"), 20)
        a = gw.api()
        check(a.get("kinds", {}).get("services", {}).get("synced") and not a.get("synced"),
              "Services listed, EndpointSlices not yet: the API is not synced", a)
        code, body = gw.healthz()
        check(code == 503 and body.get("apiSynced") is False, "/healthz answers 503 before the API has synced",
              (code, body))
        check(set(gw.services()) == {"file/only"} and a.get("publishes") == 0,
              "nothing from the API is published before every kind has listed", sorted(gw.services())[:5])
        srv.hold["endpointslices"].set()
        check(wait_for(lambda: gw.api().get("synced"), 20), "the API syncs once the slices are listed", gw.api())
        check(wait_for(lambda: gw.healthz()[0] == 200, 10), "/healthz answers 200 once synced", gw.healthz())
        svcs = wait_for(lambda: gw.services() if "bulk/bulk-0249" in gw.services() else None, 10) or {}
        check("default/test-svc" in svcs and "bulk/bulk-0000" in svcs and "bulk/bulk-0249" in svcs,
              "the API's Services are published with the file's", sorted(svcs)[:5])
        a = gw.api()
        check(a.get("publishes") == 1, "the first sync is one publish", a.get("publishes"))
        pages = srv.count("services", watch=False)
        check(pages >= 3 and a["kinds"]["services"]["objects"] == len(api_services),
              f"Services listed in pages of 100 ({pages} requests), each held once",
              (pages, a["kinds"]["services"]["objects"], len(api_services)))
        check(svcs.get("bulk/bulk-0007") == {"10.245.0.8"}, "a listed slice's endpoint is published",
              svcs.get("bulk/bulk-0007"))

        # --- an EndpointSlice edit ---------------------------------------------------------------
        sl = next(o for o in fixtures if o["kind"] == "EndpointSlice" and o["metadata"]["labels"].get(
            "kubernetes.io/service-name") == "test-svc" and o["addressType"] == "IPv4")
        sl = copy.deepcopy(sl)
        sl["endpoints"][0]["addresses"] = ["10.244.9.9"]
        sl["metadata"].setdefault("annotations", {})["endpoints.kubernetes.io/last-change-trigger-time"] = \
            now_rfc3339()
        srv.put(sl)
        check(wait_for(lambda: "10.244.9.9" in gw.services().get("default/test-svc", set()), 10),
              "an EndpointSlice edit on the server reaches the published endpoints",
              gw.services().get("default/test-svc"))
        n = wait_for(lambda: gw.metric("kubeproxy_network_programming_duration_seconds_count"), 5)
        check(n and n >= 1, "the edit is observed in network_programming_duration_seconds", n)

        # --- 410: history compacted under the watch --------------------------------------------
        # The watches cut, then a change and the history compacted before they come back (their
        # backoff is 0.8 s at least): the versions they resume from are gone.
        before = gw.api()["kinds"]
        srv.drop_streams()
        srv.put(sl)
        srv.compact()
        check(wait_for(lambda: all(gw.api()["kinds"][k]["relists"] > before[k]["relists"]
                                   for k in ("services", "endpointslices")), 20),
              "410 Gone (an ERROR event) -> both kinds relist", gw.api()["kinds"])
        a = gw.api()
        check(a["kinds"]["services"]["objects"] == len(api_services) and
              set(gw.services()) == set(svcs), "after the relist: the same Services, none lost, none twice",
              (a["kinds"]["services"]["objects"], len(api_services)))
        srv.put(dict(sl, endpoints=[dict(sl["endpoints"][0], addresses=["10.244.9.10"])]))
        check(wait_for(lambda: "10.244.9.10" in gw.services().get("default/test-svc", set()), 10),
              "after the relist the watch follows again", gw.services().get("default/test-svc"))

        # --- a stalled watch ------------------------------------------------------------------
        before = gw.api()["kinds"]
        srv.stall = True
        stalled = wait_for(lambda: gw.api()["kinds"]["services"]["reconnects"] > before["services"]["reconnects"],
                           25, 0.5)
        srv.stall = False
        check(stalled, "a watch silent past timeoutSeconds + 5 s is cut and reconnected", gw.api()["kinds"])
        check(wait_for(lambda: "WATCH services: no data for 8 s" in gw.log(), 5), "the stalled watch is logged",
              gw.log()[-500:])

        # --- bad input ------------------------------------------------------------------------
        def bad(reason):
            return gw.api().get("bad_input", {}).get(reason, 0)

        def inject(kind, data, reason, what):
            n0 = bad(reason)
            r0 = gw.api()["kinds"][kind]["relists"]
            # A stream the gateway left (after a stall) may take it: sent again until counted.
            ok = False
            for _ in range(4):
                srv.send_raw(data, kind)
                ok = wait_for(lambda: bad(reason) > n0, 5)
                if ok:
                    break
            check(ok, f"{what}: counted as {reason}", gw.api().get("bad_input"))
            return r0

        r0 = inject("services", b"this is not JSON\n", "malformed_event", "a line that is not JSON")
        check(wait_for(lambda: gw.api()["kinds"]["services"]["relists"] > r0, 15),
              "a malformed event ends in a relist", gw.api()["kinds"]["services"])
        inject("services", (json.dumps({"type": "ADDED", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {
            "name": "p", "namespace": "default", "resourceVersion": "1"}}}) + "\n").encode(),
            "unexpected_kind", "a Pod on the Services watch")
        inject("endpointslices", b'{"type": "EXPLODED", "object": {}}\n', "unknown_event_type",
               "an unknown event type")
        inject("services", (b'{"type": "ADDED", "object": {"kind": "Ser', "cut"), "truncated",
               "an event cut mid-object")
        srv.put({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "broken", "namespace": "default"},
                 "spec": {"clusterIP": "not-an-address", "ports": [{"port": 80}]}})
        srv.put({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                 "metadata": {"name": "lonely-1", "namespace": "default",
                              "labels": {"kubernetes.io/service-name": "nosuch"}},
                 "ports": [{"port": 80, "protocol": "TCP"}],
                 "endpoints": [{"addresses": ["10.244.7.7"]}]})
        srv.put({"apiVersion": "v1", "kind": "Service", "metadata": {
                 "name": "other-proxy", "namespace": "default",
                 "labels": {"service.kubernetes.io/service-proxy-name": "someone-else"}},
                 "spec": {"clusterIP": "10.96.77.1", "ports": [{"port": 80}]}})
        srv.put({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fine", "namespace": "default"},
                 "spec": {"clusterIP": "10.96.77.2", "ports": [{"port": 80}]}})
        # The two kinds' watches are separate streams: wait for both to have delivered.
        ok = wait_for(lambda: "default/fine" in gw.services() and gw.api().get("orphan_slices") == 1, 15)
        a = gw.api()
        rej = {r["object"]: r for r in a.get("rejected", [])}
        check(ok and "Service default/broken" in rej and rej["Service default/broken"]["reason"] == "invalid_object"
              and "not-an-address" in rej["Service default/broken"]["message"],
              "an object the reader refuses is left out, with its reason and message", a.get("rejected"))
        svcs = gw.services()
        check("default/fine" in svcs and "default/test-svc" in svcs and "default/broken" not in svcs,
              "the good objects are still served beside a refused one", sorted(svcs)[:8])
        check(a.get("orphan_slices") == 1, "a slice whose Service does not exist is held back and counted",
              f"orphan_slices {a.get('orphan_slices')}")
        check("default/other-proxy" not in svcs,
              "a Service labelled for another service-proxy-name is not served", sorted(svcs)[:8])
        check(gw.metric('svcgate_kube_rejected_objects{reason="invalid_object"}') == 1,
              "svcgate_kube_rejected_objects counts it", gw.metric('svcgate_kube_rejected_objects{reason="invalid_object"}'))
        check(gw.p.poll() is None, "the gateway runs on after the bad input")

        # --- the server restarted with a new history -------------------------------------------
        fresh = [o for o in fixtures] + [{"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": "after-restart", "namespace": "default"}, "spec": {"clusterIP": "10.96.88.1",
                                                                       "ports": [{"port": 80}]}}]
        before = gw.api()["kinds"]
        srv.restart(fresh)
        ok = wait_for(lambda: "default/after-restart" in gw.services() and "bulk/bulk-0000" not in gw.services(), 30)
        a = gw.api()
        check(ok, "after a restart with a new history: relisted, converged to the new state", sorted(gw.services())[:6])
        check(sum(a["kinds"][k]["relists"] + a["kinds"][k]["reconnects"] for k in a["kinds"]) >
              sum(before[k]["relists"] + before[k]["reconnects"] for k in before),
              "the restart is counted as relists or reconnects", a["kinds"])
        check("file/only" in gw.services(), "the file's Service is served throughout")

        # --- the API server gone: the last good state serves -----------------------------------
        srv.stop()
        time.sleep(2)
        check("default/after-restart" in gw.services() and gw.p.poll() is None,
              "with the API server gone the last good state keeps serving", sorted(gw.services())[:4])
        check(wait_for(lambda: gw.api()["kinds"]["services"]["last_error"], 15),
              "the lost connection is in status", gw.api()["kinds"]["services"])
    finally:
        gw.stop()

    # --- wrong token, wrong CA, exec plugin: a second server -----------------------------------
    d2 = os.path.join(d, "two")
    os.mkdir(d2)
    srv = kube_apiserver.Server(d2)
    for o in fixtures:
        srv.put(o)
    other = os.path.join(d, "other")
    os.mkdir(other)
    kube_apiserver.make_certs(other)
    for name, kc, want in (("token", srv.kubeconfig(f"{d}/kc-token", token="wrong"), "401"),
                           ("ca", srv.kubeconfig(f"{d}/kc-ca", ca=f"{other}/ca.crt"), "certificate")):
        g = Gateway(svcgate, d, "gw-" + name, kc)
        try:
            err = wait_for(lambda: g.api().get("kinds", {}).get("services", {}).get("last_error"), 15) or ""
            check(want in err, f"a wrong {name}: a clear error in status ({err!r})", g.api())
            check(not g.api().get("synced") and set(g.services()) == {"file/only"} and g.healthz()[0] == 503,
                  f"a wrong {name}: not synced, not ready, the file's Service served", g.healthz())
            check(wait_for(lambda: want in g.log(), 5), f"a wrong {name}: logged", g.log()[-600:])
        finally:
            g.stop()

    # Two gateways following one server on their own, as the HA lab's do: the same Services with
    # the same endpoints in the same order (with one Maglev seed, the same choices), after an edit
    # too.
    kc = srv.kubeconfig(f"{d}/kc-pair")
    pair = [Gateway(svcgate, d, f"gw-pair{i}", kc) for i in (1, 2)]
    try:
        def published(g):
            return [(e["service"], e["endpoint"], e["conditions"]) for e in g.ctl("endpoints") or []]
        check(all(wait_for(lambda g=g: g.api().get("synced"), 20) for g in pair), "two gateways sync on their own")
        extra = [o for o in kube_apiserver.generated(40, "pair")]
        for o in extra:
            srv.put(o)
        same = wait_for(lambda: len(published(pair[0])) >= 40 and published(pair[0]) == published(pair[1]), 15)
        check(same, "two gateways publish the same endpoints in the same order",
              (len(published(pair[0])), len(published(pair[1]))))
    finally:
        for g in pair:
            g.stop()

    # The gateway's own Node (fieldSelector metadata.name) gives its zone for topology hints, and
    # ServiceCIDRs join the service CIDRs; a server without ServiceCIDRs (404) leaves that kind
    # synced and empty.
    hinted = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "topo", "namespace": "default"},
               "spec": {"clusterIP": "10.96.70.1", "trafficDistribution": "PreferSameZone",
                        "ports": [{"name": "", "port": 80, "protocol": "TCP"}]}},
              {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
               "metadata": {"name": "topo-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "topo"}},
               "ports": [{"name": "", "port": 80, "protocol": "TCP"}],
               "endpoints": [{"addresses": [f"10.9.0.{10 + i}"], "conditions": {"ready": True},
                              "hints": {"forZones": [{"name": z}]}} for i, z in enumerate(("zone-a", "zone-b"))]}]
    for o in hinted:
        srv.put(o)

    def node(name, zone):
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}}
    srv.put(node("gw-node", "zone-a"))
    srv.put(node("another-node", "zone-b"))
    kc = srv.kubeconfig(f"{d}/kc-node")
    g = Gateway(svcgate, d, "gw-node", kc, cluster=", node_name: gw-node")
    try:
        def topo():
            eps = [e for e in g.ctl("endpoints") or [] if e["service"] == "default/topo:"]
            return sorted(e["endpoint"] for e in eps if e.get("internal"))
        check(wait_for(lambda: g.api().get("synced"), 20) and wait_for(lambda: topo() == ["10.9.0.10:80"], 10),
              "the gateway's Node (zone-a) chooses the zone-a endpoint", (topo(), g.api().get("kinds", {}).get("nodes")))
        nodes = g.api()["kinds"]["nodes"]
        fsel = {q.get("fieldSelector") for _, pth, q, _ in srv.requests if pth == "/api/v1/nodes"}
        check(nodes["objects"] == 1 and fsel == {"metadata.name=gw-node"},
              "only the gateway's own Node is followed (fieldSelector)", (nodes, fsel))
        srv.put(node("gw-node", "zone-b"))
        check(wait_for(lambda: topo() == ["10.9.0.11:80"], 10),
              "the Node's zone label changed on the server: the zone-b endpoint is chosen", topo())
        cidrs = lambda: (g.ctl("status") or {}).get("kubernetes", {}).get("service_cidrs")  # noqa: E731
        check(cidrs() == 0, "no ServiceCIDR yet", cidrs())
        srv.put({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                 "spec": {"cidrs": ["10.200.0.0/16"]}})
        check(wait_for(lambda: cidrs() == 1, 10), "a ServiceCIDR on the server joins the gateway's service CIDRs",
              cidrs())
    finally:
        g.stop()
    srv.missing.add("servicecidrs")
    g = Gateway(svcgate, d, "gw-nocidr", kc)
    try:
        check(wait_for(lambda: g.api().get("synced"), 20), "a server without ServiceCIDRs (404): still synced",
              g.api().get("kinds", {}).get("servicecidrs"))
        sc = g.api()["kinds"]["servicecidrs"]
        check(sc["objects"] == 0 and "HTTP 404" in sc["last_error"] and g.api()["kinds"]["nodes"]["lists"] == 0,
              "its status says 404 and none held; without node_name no Node is followed", g.api()["kinds"])
    finally:
        g.stop()
    srv.missing.clear()

    # An exec plugin whose tokens expire after 2 s: kubectl's protocol, run again when expired.
    plugin = os.path.join(d, "cred-plugin")
    with open(plugin, "w") as f:
        f.write("#!/usr/bin/python3\nimport datetime, json, os, time\n"
                "n = int(time.time() * 1000)\n"
                "assert json.loads(os.environ['KUBERNETES_EXEC_INFO'])['kind'] == 'ExecCredential'\n"
                "exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)\n"
                "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
                " 'status': {'token': f'exec-token-{n}', 'expirationTimestamp': exp.strftime('%Y-%m-%dT%H:%M:%SZ')}}))\n")
    os.chmod(plugin, os.stat(plugin).st_mode | stat.S_IEXEC)
    srv.token_prefixes.append("exec-token-")
    kc = srv.kubeconfig(f"{d}/kc-exec", token=None, exec_plugin={
        "apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "interactiveMode": "Never"})
    g = Gateway(svcgate, d, "gw-exec", kc)
    try:
        check(wait_for(lambda: g.api().get("synced"), 20), "an exec credential plugin's token is taken", g.api())
        runs = wait_for(lambda: g.api().get("exec_runs", 0) >= 2 and g.api()["exec_runs"], 20)
        check(runs, "an expired exec credential is refreshed (the plugin runs again)", g.api().get("exec_runs"))
        check(not g.api().get("credentials_error"), "the plugin's runs left no error", g.api().get("credentials_error"))
    finally:
        g.stop()
        srv.stop()

    # --- the config check refuses what the start would --------------------------------------
    insecure = os.path.join(d, "kc-insecure")
    with open(f"{d}/kc-token") as f:
        k = json.load(f)
    k["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    with open(insecure, "w") as f:
        json.dump(k, f)
    with open(f"{d}/check.yaml", "w") as f:
        f.write("dataplane:\n  ports: [{name: a, device: net_null0}]\n"
                f"kubernetes:\n  api: {{kubeconfig: {insecure}}}\n")
    r = subprocess.run([svcgate, "--config", f"{d}/check.yaml", "--check"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "insecure-skip-tls-verify is refused" in r.stderr,
          "svcgate --check refuses a kubeconfig that skips TLS verification", r.stderr)


with tempfile.TemporaryDirectory(dir=os.environ.get("KEEP_TMP")) as tmp:
    main(tmp)
checks.finish("kubernetes.api against the test API server")
