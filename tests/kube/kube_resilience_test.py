#!/usr/bin/python3
"""kubernetes.api against a cluster, an API server and a network that misbehave (issue 53): each
part has its own test server (tests/support/kube_apiserver.py) and gateway (net_null port).

  - tenants: two Services in different namespaces claiming one externalIP:port, a ClusterIP that
    is another's externalIP, a nodePort outside the range, present at start and added later: every
    other change is still published within min_sync_period + 1 s; the older Service keeps the VIP;
  - a watch event nested 100,000 levels deep: counted (over_limits), survived, relisted;
  - a watch silenced (no byte, no end) at default settings: replaced within 90 s;
  - a gateway whose own file is broken under it while the API has changes: stale after 60 s
    (/healthz 503), healthy again once mended;
  - every WATCH answered 200 and closed at once: at most 15 WATCHes of a kind in 10 s; every WATCH
    410: at most 8 LISTs of a kind in 10 s; 503 with Retry-After 4: at most 4 WATCHes in 10 s;
  - every WATCH 500 while LIST works: a Service deleted on the server leaves within 60 s;
  - every continue token expired: the sync completes (one unpaged LIST);
  - a server certificate from a CA the kubeconfig does not name is refused even when
    $SSL_CERT_FILE names it;
  - a path-prefixed server URL syncs; an IPv6 server ([::1]) syncs;
  - HTTPS_PROXY names a proxy: it is used (the server's name resolves only through it);
  - tls-server-name is verified; a certificate naming the server only in its CN is refused;
    client certificate files are read again when they change; a certificate's chain is sent; an
    exec plugin's certificate is used; a hung exec plugin does not hold the shutdown.

usage: kube_resilience_test.py SVCGATE"""
import json
import os
import shutil
import stat
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import checks  # noqa: E402
import kube_apiserver  # noqa: E402
from connect_proxy import ConnectProxy  # noqa: E402
from kube_gateway import Gateway, check, wait_for  # noqa: E402

svcgate = sys.argv[1]
FIXTURES = os.path.join(HERE, "..", "..", "config", "k8s-objects.yaml")
# The defaults but for min_sync_period: what an operator would run.
DEFAULTS = " min_sync_period_ms: 1000"


def service(ns, name, ip, created=None, external=(), port=80, node_port=None):
    spec = {"clusterIP": ip, "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}
    if external:
        spec["externalIPs"] = list(external)
    if node_port:
        spec["type"] = "NodePort"
        spec["ports"][0]["nodePort"] = node_port
    meta = {"name": name, "namespace": ns}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def slice_of(ns, name, ip):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": name + "-1", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}]}


def server(d, name, objects=(), **kw):
    sd = os.path.join(d, name)
    os.mkdir(sd)
    srv = kube_apiserver.Server(sd, **kw)
    for o in objects:
        srv.put(o)
    return srv


def vip_owner(g, ip):
    """The Service whose port serves external IP `ip`, from `svcgatectl services`."""
    for sp in g.ctl("services") or []:
        if ip in sp.get("external_ips", []) or sp.get("cluster_ip") == ip:
            return sp["name"].split(":")[0]
    return None


def tenants(d):
    old, new = "2025-01-01T00:00:00Z", "2026-06-01T00:00:00Z"
    objs = [service("team-a", "web", "10.96.10.1", old, external=["192.0.2.10"]), slice_of("team-a", "web", "10.1.0.1"),
            # another tenant's Service claims the same externalIP:port, and is newer
            service("team-b", "grab", "10.96.10.2", new, external=["192.0.2.10"]), slice_of("team-b", "grab", "10.1.0.2"),
            # a nodePort outside cluster.nodeport_range (30000-32767)
            service("team-c", "np", "10.96.10.3", old, node_port=8080), slice_of("team-c", "np", "10.1.0.3"),
            service("default", "other", "10.96.10.4", old), slice_of("default", "other", "10.1.0.4")]
    srv = server(d, "tenants", objs, bookmark_seconds=1.0)
    g = Gateway(svcgate, d, "gw-tenants", srv.kubeconfig(f"{d}/kc-tenants"), api=DEFAULTS)
    try:
        check(wait_for(lambda: g.api().get("synced") and "default/other" in g.services(), 20),
              "tenants: a gateway started while conflicting Services exist syncs and publishes", g.api())
        svcs = g.services()
        check({"team-a/web", "team-b/grab", "team-c/np", "default/other"} <= set(svcs),
              "tenants: every Service is served, the conflicting one too (its other VIPs)", sorted(svcs))
        check(vip_owner(g, "192.0.2.10") == "team-a/web", "tenants: the older Service keeps the shared externalIP:port",
              vip_owner(g, "192.0.2.10"))
        np = [sp for sp in g.ctl("services") or [] if sp["name"].startswith("team-c/np")]
        check(np and np[0]["node_port"] == 8080, "tenants: a nodePort outside the range is served", np)
        issues = (g.ctl("status") or {}).get("kubernetes", {}).get("object_issues", [])
        reasons = {(i["object"], i["reason"], i["left_out"]) for i in issues}
        check(("Service team-b/grab", "vip_conflict", True) in reasons and
              ("Service team-c/np", "nodeport_out_of_range", False) in reasons and
              not any(o == "Service team-a/web" for o, _, _ in reasons),
              "tenants: status lists the left-out entry and the out-of-range nodePort, with reasons", issues)
        txt = g.text("status")
        check("object      Service team-b/grab (vip_conflict, left out):" in txt and
              "object      Service team-c/np (nodeport_out_of_range, served):" in txt,
              "tenants: svcgatectl status's table lists them too", txt[-600:])
        check(g.metric('svcgate_object_issues{reason="vip_conflict"}') == 1, "tenants: counted in svcgate_object_issues",
              g.metric('svcgate_object_issues{reason="vip_conflict"}'))

        def edit_reaches(ip, what):
            srv.put(slice_of("default", "other", ip))
            t0 = time.monotonic()
            ok = wait_for(lambda: ip in g.services().get("default/other", set()), 10, 0.05)
            dt = time.monotonic() - t0
            check(ok and dt <= 2.0, f"tenants: {what}: another Service's edit is published in {dt:.2f} s (bound 2 s)",
                  g.api().get("last_error"))
        edit_reaches("10.1.0.44", "conflicts present at start")
        # Added live: a ClusterIP that is another Service's externalIP, and one more claim.
        srv.put(service("team-d", "clash", "192.0.2.10", new))
        srv.put(service("team-e", "late", "10.96.10.5", new, external=["192.0.2.10"]))
        edit_reaches("10.1.0.45", "conflicts added live")
        check(vip_owner(g, "192.0.2.10") == "team-a/web", "tenants: still the older Service's VIP",
              vip_owner(g, "192.0.2.10"))
        st = g.api()
        check(not st.get("stale") and g.healthz()[0] == 200, "tenants: nothing stale, /healthz 200",
              (st.get("stale"), g.healthz()))
    finally:
        g.stop()
        srv.stop()


def deep_event(d):
    srv = server(d, "deep", kube_apiserver.load_objects(FIXTURES), bookmark_seconds=1.0)
    g = Gateway(svcgate, d, "gw-deep", srv.kubeconfig(f"{d}/kc-deep"))
    try:
        check(wait_for(lambda: g.api().get("synced"), 20), "deep: synced")
        r0 = g.api()["kinds"]["services"]["relists"]
        depth = 100000
        # A Service whose spec hides the nesting: well-formed JSON, a valid object's shape.
        line = ('{"type": "ADDED", "object": {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "deep", '
                '"namespace": "default", "resourceVersion": "999999"}, "spec": ' + "[" * depth + "]" * depth + "}}\n").encode()
        ok = False
        for _ in range(4):
            srv.send_raw(line, "services")
            ok = wait_for(lambda: g.api().get("bad_input", {}).get("over_limits", 0) > 0, 5)
            if ok:
                break
        check(ok, "deep: an event nested 100,000 levels is counted as over_limits", g.api().get("bad_input"))
        check(g.p.poll() is None, "deep: the gateway survives it")
        relists = lambda: g.api().get("kinds", {}).get("services", {}).get("relists", 0)  # noqa: E731
        check(wait_for(lambda: relists() > r0, 15), "deep: and relists", relists())
        check(wait_for(lambda: "default/test-svc" in g.services(), 5), "deep: the Services are still served")
    finally:
        g.stop()
        srv.stop()


class Silenced:
    """A watch silenced at default settings (timeoutSeconds 300, bookmarks every 60 s): started
    first, checked last, so that its 75 s pass while the other parts run."""

    def __init__(self, d):
        self.srv = server(d, "silent", kube_apiserver.load_objects(FIXTURES))
        self.g = Gateway(svcgate, d, "gw-silent", self.srv.kubeconfig(f"{d}/kc-silent"), api="")
        check(wait_for(lambda: self.g.api().get("synced"), 20), "silenced: synced at default settings",
              self.g.api())
        time.sleep(1)
        self.before = self.srv.count("services", watch=True)
        self.srv.stall = True
        self.t0 = time.monotonic()

    def finish(self):
        try:
            ok = wait_for(lambda: self.srv.count("services", watch=True) > self.before,
                          max(0, 95 - (time.monotonic() - self.t0)), 0.5)
            # When the new WATCH came, from the server's log: the other parts may end after it.
            path = kube_apiserver.KINDS["services"][0]
            dt = min((t for _, p, q, t in self.srv.requests if t > self.t0 and p == path and q.get("watch") in ("1", "true")),
                     default=time.monotonic()) - self.t0
            check(ok and dt <= 90, f"silenced: a watch silent at default settings is replaced after {dt:.0f} s "
                  "(bound 90 s)", self.g.api()["kinds"]["services"])
            check("no data for 75 s" in self.g.log(), "silenced: logged as no data for 75 s", self.g.log()[-400:])
        finally:
            self.srv.stall = False
            self.g.stop()
            self.srv.stop()


class Stale:
    """A gateway whose publishes keep failing (its own file broken under it) while the API has
    changes for it: stale after 60 s, /healthz 503; healthy again once the file is mended. Started
    first beside Silenced, checked last."""

    def __init__(self, d):
        self.srv = server(d, "stale", kube_apiserver.load_objects(FIXTURES), bookmark_seconds=1.0)
        self.g = Gateway(svcgate, d, "gw-stale", self.srv.kubeconfig(f"{d}/kc-stale"))
        check(wait_for(lambda: self.g.api().get("synced") and self.g.healthz()[0] == 200, 20), "stale: synced, healthy")
        with open(self.g.cfg) as f:
            self.good = f.read()
        with open(self.g.cfg, "w") as f:
            f.write(self.good.replace("cluster: {", "cluster: {masquerade_al: true, ", 1))
        self.srv.put(slice_of("default", "test-svc", "10.1.9.9"))
        self.t0 = time.monotonic()

    def finish(self):
        try:
            code = wait_for(lambda: self.g.healthz()[0] == 503, 75 - (time.monotonic() - self.t0), 0.5)
            dt = time.monotonic() - self.t0
            a = self.g.api()
            body = self.g.healthz()[1]
            check(code and a.get("stale") and isinstance(body, dict) and body.get("apiFresh") is False and dt >= 59,
                  f"stale: changes unpublished for {dt:.0f} s (the rule: 60 s): stale, /healthz 503, apiFresh false",
                  (a.get("pending_seconds"), self.g.healthz()))
            # Each try reads the broken file and fails; the next waits min_sync_period (200 ms
            # here), as a publish would: not a loop that takes a core.
            failed = (self.g.ctl("status") or {}).get("reload_failures", -1)
            broken = time.monotonic() - self.t0
            check(0 < failed <= broken / 0.2 + 5, f"stale: the failing publish was tried {failed} times in "
                  f"{broken:.0f} s (at most one a min_sync_period, 200 ms)")
            with open(self.g.cfg, "w") as f:
                f.write(self.good)
            check(wait_for(lambda: self.g.healthz()[0] == 200 and not self.g.api().get("stale"), 15),
                  "stale: the file mended, the change is published and the gateway healthy again", self.g.healthz())
        finally:
            self.g.stop()
            self.srv.stop()


def hammering(d):
    """Each fault on a fresh gateway (a backoff grown by one fault would flatter the next)."""
    objs = kube_apiserver.load_objects(FIXTURES)
    srv = server(d, "hammer", objs, bookmark_seconds=1.0)
    kc = srv.kubeconfig(f"{d}/kc-hammer")

    def window(name, fault, retry_after=None, seconds=10):
        g = Gateway(svcgate, d, f"gw-hammer-{name}", kc)
        try:
            check(wait_for(lambda: g.api().get("synced"), 20), f"hammer {name}: synced")
            srv.watch_fault, srv.retry_after = fault, retry_after
            srv.drop_streams()
            t0 = time.monotonic()
            time.sleep(seconds)
            w, lists = srv.count_since("services", t0, True), srv.count_since("services", t0, False)
            return w, lists, g.api()
        finally:
            srv.watch_fault, srv.retry_after = None, None
            g.stop()

    w, lists, _ = window("close", "close")
    check(w <= 15, f"hammer: WATCHes answered 200 and closed at once: {w} WATCHes, {lists} LISTs in 10 s "
          "(bound 15 WATCHes)")
    w, lists, a = window("gone", 410)
    check(lists <= 8 and a["kinds"]["services"]["relists"] > 0,
          f"hammer: every WATCH 410: {lists} LISTs, {w} WATCHes in 10 s (bound 8 LISTs)")
    w, lists, a = window("retry", 503, retry_after=4)
    check(1 <= w <= 4, f"hammer: 503 with Retry-After 4: {w} WATCHes in 10 s (bound 4)")
    codes = a.get("requests", {})
    check(codes.get("WATCH", {}).get("503", 0) > 0 and codes.get("LIST", {}).get("200", 0) > 0,
          "hammer: requests counted by verb and code", codes)

    # Every WATCH fails while LIST works (a proxy that cannot stream): relisted after each.
    g = Gateway(svcgate, d, "gw-hammer-500", kc)
    try:
        check(wait_for(lambda: g.api().get("synced") and "default/test-svc" in g.services(), 20),
              "hammer 500: synced")
        srv.watch_fault = 500
        srv.drop_streams()
        time.sleep(3)
        m = g.metric('svcgate_kube_rest_client_requests_total{verb="WATCH",code="500"}')
        check(m and m > 0, "hammer: svcgate_kube_rest_client_requests_total counts the 500s", m)
        srv.delete("services", "default/test-svc")
        t0 = time.monotonic()
        ok = wait_for(lambda: "default/test-svc" not in g.services(), 60, 0.5)
        dt = time.monotonic() - t0
        check(ok, f"hammer: every WATCH 500: a Service deleted on the server leaves after {dt:.0f} s (bound 60 s)",
              g.api()["kinds"]["services"])
    finally:
        srv.watch_fault = None
        g.stop()
        srv.stop()


def expired_continue(d):
    objs = kube_apiserver.load_objects(FIXTURES) + kube_apiserver.generated(250)
    srv = server(d, "cont", objs, bookmark_seconds=1.0)
    srv.expire_continues = True
    g = Gateway(svcgate, d, "gw-cont", srv.kubeconfig(f"{d}/kc-cont"))
    try:
        ok = wait_for(lambda: g.api().get("synced") and "bulk/bulk-0249" in g.services(), 30)
        a = g.api()
        check(ok and a["kinds"]["services"]["unpaged_lists"] >= 1,
              "continue: every continue token expired: synced by one unpaged LIST",
              {k: (v.get("unpaged_lists"), v.get("last_error")) for k, v in a.get("kinds", {}).items()})
    finally:
        g.stop()
        srv.stop()


def tls_and_addressing(d):
    objs = kube_apiserver.load_objects(FIXTURES)
    # The server's certificate from CA "one"; the kubeconfig names CA "two"; SSL_CERT_FILE names "one".
    srv = server(d, "tls", objs)
    two = os.path.join(d, "ca-two")
    os.mkdir(two)
    kube_apiserver.make_certs(two)
    g = Gateway(svcgate, d, "gw-tls", srv.kubeconfig(f"{d}/kc-tls", ca=f"{two}/ca.crt"),
                env={"SSL_CERT_FILE": f"{srv.dir}/ca.crt", "SSL_CERT_DIR": srv.dir})
    try:
        err = wait_for(lambda: g.api().get("kinds", {}).get("services", {}).get("last_error"), 15) or ""
        check("certificate" in err and not g.api().get("synced"),
              "tls: a CA the kubeconfig does not name is refused, even named by $SSL_CERT_FILE", err)
    finally:
        g.stop()
    srv.stop()

    # A path-prefixed server URL (Rancher's /k8s/clusters/ID).
    srv = server(d, "prefix", objs, prefix="/k8s/clusters/c-1")
    g = Gateway(svcgate, d, "gw-prefix", srv.kubeconfig(f"{d}/kc-prefix"))
    try:
        check(wait_for(lambda: g.api().get("synced") and "default/test-svc" in g.services(), 20),
              "prefix: a server URL with a path syncs", g.api().get("kinds", {}).get("services"))
        check(srv.count("services") > 0 and g.api().get("server", "").endswith("/k8s/clusters/c-1"),
              "prefix: every request carried the prefix", g.api().get("server"))
    finally:
        g.stop()
        srv.stop()

    # An IPv6 server: a bracketed Host and URL.
    srv = server(d, "v6", objs, host="::1")
    g = Gateway(svcgate, d, "gw-v6", srv.kubeconfig(f"{d}/kc-v6"))
    try:
        check(wait_for(lambda: g.api().get("synced") and "default/test-svc" in g.services(), 20),
              f"ipv6: a server at {srv.url} syncs", g.api().get("kinds", {}).get("services"))
    finally:
        g.stop()
        srv.stop()

    # HTTPS_PROXY: the server is named kube.test, which only the proxy resolves.
    proxy = ConnectProxy()
    srv = server(d, "proxied", objs)
    kc = srv.kubeconfig(f"{d}/kc-proxied", server=f"https://kube.test:{srv.port}")
    g = Gateway(svcgate, d, "gw-proxied", kc, env={"HTTPS_PROXY": proxy.url, "NO_PROXY": "example.com"})
    try:
        check(wait_for(lambda: g.api().get("synced"), 20), "proxy: synced through HTTPS_PROXY",
              g.api().get("kinds", {}).get("services"))
        check(f"kube.test:{srv.port}" in proxy.connects and g.api().get("proxy") == proxy.url,
              "proxy: the proxy tunnelled to the server by name", (proxy.connects[:3], g.api().get("proxy")))
    finally:
        g.stop()
        srv.stop()
        proxy.stop()


def credentials(d):
    """kubectl's TLS and credentials: tls-server-name, SANs only, rotated certificate files, a
    certificate's chain, an exec plugin's certificate, a hung exec plugin."""
    objs = kube_apiserver.load_objects(FIXTURES)
    srv = server(d, "creds", objs)

    def syncs(name, kc, want=True, env=None, wait=20):
        g = Gateway(svcgate, d, f"gw-{name}", kc, env=env)
        try:
            ok = wait_for(lambda: g.api().get("synced"), wait)
            err = g.api().get("kinds", {}).get("services", {}).get("last_error")
            return bool(ok) == want, err
        finally:
            g.stop()

    ok, err = syncs("sni-good", srv.kubeconfig(f"{d}/kc-sni-good", tls_server_name="kube.test"))
    check(ok, "tls-server-name: a name in the certificate's SANs is taken", err)
    ok, err = syncs("sni-bad", srv.kubeconfig(f"{d}/kc-sni-bad", tls_server_name="other.test"), want=False, wait=6)
    check(ok, "tls-server-name: a name not in the SANs is refused, though the address is", err)

    # A certificate whose CN is the server's address but whose SANs do not name it: Go refuses it.
    cn = os.path.join(d, "cn-only")
    os.mkdir(cn)
    kube_apiserver.make_certs(cn, san="DNS:kube.test", cn="127.0.0.1")
    cn_srv = server(d, "cn-srv", objs, certs=cn)
    ok, err = syncs("cn", cn_srv.kubeconfig(f"{d}/kc-cn"), want=False, wait=6)
    check(ok, "a certificate naming the server only in its CN is refused (SANs only)", err)
    cn_srv.stop()

    # Client certificate files, read again when they change: first another CA's, then the right one.
    other = os.path.join(d, "other-client")
    os.mkdir(other)
    kube_apiserver.make_certs(other)
    crt, key = f"{d}/rot.crt", f"{d}/rot.key"
    shutil.copy(f"{other}/client.crt", crt)
    shutil.copy(f"{other}/client.key", key)
    g = Gateway(svcgate, d, "gw-rotate", srv.kubeconfig(f"{d}/kc-rotate", token=None, cert_files=(crt, key)))
    try:
        err = wait_for(lambda: g.api().get("kinds", {}).get("services", {}).get("last_error"), 10)
        check(not g.api().get("synced") and err, "client certificate files: one of another CA is refused", err)
        time.sleep(1.1)  # a new modification time
        shutil.copy(f"{srv.dir}/client.crt", crt)
        shutil.copy(f"{srv.dir}/client.key", key)
        check(wait_for(lambda: g.api().get("synced"), 40), "client certificate files rotated: read again, synced",
              g.api().get("kinds", {}).get("services"))
    finally:
        g.stop()

    # A client certificate from an intermediate CA: synced only when the chain is sent.
    kube_apiserver.make_client_chain(srv.dir)
    ok, err = syncs("chain", srv.kubeconfig(f"{d}/kc-chain", token=None,
                                            client_cert=(f"{srv.dir}/chain.crt", f"{srv.dir}/leaf.key")))
    check(ok, "a client certificate's chain (leaf and intermediate) is sent whole", err)
    ok, err = syncs("leaf", srv.kubeconfig(f"{d}/kc-leaf", token=None,
                                           client_cert=(f"{srv.dir}/leaf.crt", f"{srv.dir}/leaf.key")),
                    want=False, wait=6)
    check(ok, "the same leaf without its intermediate is refused (the check above can fail)", err)

    # An exec plugin that answers with a client certificate, and one that hangs.
    plugin = os.path.join(d, "cert-plugin")
    with open(plugin, "w") as f:
        f.write("#!/usr/bin/python3\nimport json\n"
                f"c = open({srv.dir + '/client.crt'!r}).read()\nk = open({srv.dir + '/client.key'!r}).read()\n"
                "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
                " 'status': {'clientCertificateData': c, 'clientKeyData': k}}))\n")
    hung = os.path.join(d, "hung-plugin")
    with open(hung, "w") as f:
        f.write("#!/bin/sh\nexec sleep 1000\n")
    for p in (plugin, hung):
        os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
    exec_of = {"apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never"}
    ok, err = syncs("exec-cert", srv.kubeconfig(f"{d}/kc-exec-cert", token=None,
                                                exec_plugin=dict(exec_of, command=plugin)))
    check(ok, "an exec plugin's clientCertificateData and clientKeyData are used", err)
    g = Gateway(svcgate, d, "gw-hung", srv.kubeconfig(f"{d}/kc-hung", token=None, exec_plugin=dict(exec_of, command=hung)))
    time.sleep(2)
    t0 = time.monotonic()
    g.stop()
    dt = time.monotonic() - t0
    check(g.p.returncode is not None and dt < 10, f"a hung exec plugin does not hold the shutdown: stopped in {dt:.1f} s")
    srv.stop()


def main(d):
    silenced, stale = Silenced(d), Stale(d)
    for part in (tenants, deep_event, hammering, expired_continue, tls_and_addressing, credentials):
        part(d)
    silenced.finish()
    stale.finish()


with tempfile.TemporaryDirectory() as tmp:
    main(tmp)
checks.finish("kubernetes.api against misbehaving tenants, servers and networks")
