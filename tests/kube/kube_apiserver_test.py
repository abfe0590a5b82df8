#!/usr/bin/python3
"""The tests' own API server (tests/support/kube_apiserver.py) as a LoadBalancer controller and
kubectl use it, without svcgate: raw HTTPS requests (urllib, the server's CA and token) and
Debian's kubectl 1.20 (kubernetes-client), with a kubeconfig from Server.kubeconfig and its own
HOME and --cache-dir.

  - a type LoadBalancer Service created by `kubectl create -f` gets a clusterIP and a nodePort,
    a second POST of it is 409 AlreadyExists, a dual-stack one gets an address of each family;
  - `kubectl get svc` prints kube-apiserver's columns from the server's Table: EXTERNAL-IP
    <pending>, then the address a status PATCH wrote; -A adds NAMESPACE; -o yaml the object;
  - a status PATCH with a stale resourceVersion is 409 Conflict, with the current one it bumps the
    version and a watch sees MODIFIED; one that changes nothing keeps the version and sends no
    event; spec in a status PATCH and status in a PUT are ignored; json-patch is 415;
  - conflict_next: another writer's version (MODIFIED) and 409, then the retry succeeds;
  - a Lease created, read and updated, 409 on a stale version; an Event POSTed with generateName;
    Namespaces created and listed with a labelSelector; `kubectl get lease/events/ns`;
  - `kubectl delete svc`: 200 Status, DELETED event, then 404; fail_writes with Retry-After; every
    write recorded with who wrote it (token or certificate CN); discovery's short names.

usage: kube_apiserver_test.py KUBECTL"""
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import checks  # noqa: E402
import kube_apiserver  # noqa: E402
from kube_gateway import check, wait_for  # noqa: E402

KUBECTL = sys.argv[1] if len(sys.argv) > 1 else "kubectl"
# kubectl get's Accept
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")
MERGE, STRATEGIC = "application/merge-patch+json", "application/strategic-merge-patch+json"
NS = "lbtest"

SERVICE_YAML = f"""apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {NS}
spec:
  type: LoadBalancer
  selector: {{app: web}}
  ports:
  - name: http
    port: 80
    targetPort: 8080
"""


class Api:
    """Raw HTTPS requests to the server: (code, parsed body, headers)."""

    def __init__(self, srv, token="test-token", cert=None):
        self.srv, self.token = srv, token
        self.ctx = ssl.create_default_context(cafile=f"{srv.dir}/ca.crt")
        if cert:
            self.ctx.load_cert_chain(*cert)

    def __call__(self, method, path, body=None, ctype="application/json", accept="application/json"):
        headers = {"Content-Type": ctype, "Accept": accept}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.srv.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(r, context=self.ctx, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null"), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null"), dict(e.headers)


class Watch:
    """A WATCH of path from resourceVersion rv in a thread; events as they come."""

    def __init__(self, api, path, rv):
        self.events = []
        req = urllib.request.Request(f"{api.srv.url}{path}?watch=1&resourceVersion={rv}&timeoutSeconds=25",
                                     headers={"Authorization": f"Bearer {api.token}"})
        self.resp = urllib.request.urlopen(req, context=api.ctx, timeout=30)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        try:
            for line in self.resp:
                if line.strip():
                    self.events.append(json.loads(line))
        except (OSError, ValueError):
            pass

    def of(self, typ, rv=None):
        return [e for e in self.events if e["type"] == typ and
                (rv is None or e["object"]["metadata"]["resourceVersion"] == rv)]


def kubectl(d, *args, stdin=None):
    """Debian's kubectl against the server: (exit code, stdout, stderr)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d}
    try:
        r = subprocess.run([KUBECTL, "--kubeconfig", f"{d}/kubeconfig", "--cache-dir", f"{d}/cache", *args],
                           input=stdin, capture_output=True, text=True, timeout=60, env=env)
    except OSError as e:
        return 127, "", str(e)
    return r.returncode, r.stdout, r.stderr


class KubectlWatch:
    """`kubectl get ... -w` in the background, its lines as they come."""

    def __init__(self, d, *args):
        self.lines = []
        self.p = subprocess.Popen([KUBECTL, "--kubeconfig", f"{d}/kubeconfig", "--cache-dir", f"{d}/cache", "get",
                                   *args, "-w"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d})
        threading.Thread(target=lambda: self.lines.extend(self.p.stdout), daemon=True).start()

    def stop(self):
        self.p.kill()
        self.p.wait()
        return "".join(self.lines)


def row(out, name):
    """The cells of the line of `kubectl get` output that names `name`."""
    return next((line.split() for line in out.splitlines() if name in line.split()), [])


def dig(obj, *path):
    """obj[p0][p1]..., or None where a part is missing (a wrong answer fails its check, not the test)."""
    for p in path:
        try:
            obj = obj[p]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def in_net(ip, cidr):
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(cidr)
    except ValueError:
        return False


def namespaces(d, srv, api):
    rc, out, err = kubectl(d, "create", "-f", "-", stdin=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"
                           "  labels: {tier: gold}\n")
    check(rc == 0 and f"namespace/{NS} created" in out, "kubectl create -f: a Namespace", err)
    code, ns, _ = api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "plain", "labels": {"tier": "bronze"}}})
    check(code == 201 and ns["status"] == {"phase": "Active"} and ns["spec"] == {"finalizers": ["kubernetes"]} and
          ns["metadata"].get("uid") and ns["metadata"].get("creationTimestamp"),
          "POST /api/v1/namespaces: 201, phase Active, the kubernetes finalizer, uid and creationTimestamp", ns)
    code, lst, _ = api("GET", "/api/v1/namespaces?labelSelector=tier%3Dgold")
    names = [o["metadata"]["name"] for o in lst.get("items", [])]
    check(code == 200 and lst.get("kind") == "NamespaceList" and names == [NS],
          "LIST namespaces with labelSelector tier=gold: only the gold one", (code, names))
    rc, out, err = kubectl(d, "get", "ns", "-l", "tier=bronze")
    check(rc == 0 and row(out, "plain")[1:2] == ["Active"] and NS not in out,
          "kubectl get ns -l tier=bronze: NAME STATUS AGE, the bronze one alone", out + err)


def create_service(d, srv, api):
    """The LoadBalancer Service of kubectl create -f; returns it as stored."""
    count = srv.count("services")
    rc, out, err = kubectl(d, "create", "-f", "-", stdin=SERVICE_YAML)
    check(rc == 0 and "service/web created" in out, "kubectl create -f: a type LoadBalancer Service "
          "(its validation reads /openapi/v2 as protobuf)", out + err)
    svc = srv.get("services", f"{NS}/web") or {}
    spec = svc.get("spec", {})
    port = (spec.get("ports") or [{}])[0]
    check(in_net(spec.get("clusterIP", ""), "10.96.0.0/12") and spec.get("clusterIPs") == [spec.get("clusterIP")] and
          spec.get("ipFamilies") == ["IPv4"] and spec.get("ipFamilyPolicy") == "SingleStack",
          f"the Service got a clusterIP from 10.96.0.0/12: {spec.get('clusterIP')}", spec)
    check(30000 <= (port.get("nodePort") or 0) <= 32767 and port.get("protocol") == "TCP" and
          port.get("targetPort") == 8080 and spec.get("externalTrafficPolicy") == "Cluster" and
          spec.get("sessionAffinity") == "None" and svc.get("status") == {"loadBalancer": {}},
          f"and a nodePort from 30000-32767 ({port.get('nodePort')}), the server's defaults, an empty status", svc)
    w = srv.writes_for("services", f"{NS}/web")
    check(len(w) == 1 and w[0]["method"] == "POST" and w[0]["code"] == 201 and w[0]["who"] == "test-token" and
          w[0]["body"]["metadata"]["name"] == "web", "the POST is recorded in writes, with the token that wrote it", w)
    check(srv.count("services") == count, "a write is not counted as a read of the kind (count)",
          (count, srv.count("services")))
    code, again, _ = api("POST", f"/api/v1/namespaces/{NS}/services", {"apiVersion": "v1", "kind": "Service",
                                                                     "metadata": {"name": "web"}})
    check(code == 409 and again.get("reason") == "AlreadyExists" and
          again.get("message") == 'services "web" already exists', "a second POST of the name: 409 AlreadyExists",
          again)
    code, other, _ = api("POST", f"/api/v1/namespaces/{NS}/services", {"apiVersion": "v1", "kind": "Service",
                         "metadata": {"name": "x", "namespace": "elsewhere"}})
    check(code == 400, "a POST whose body names another namespace: 400", (code, other))
    code, dual, _ = api("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "dual"},
        "spec": {"ipFamilyPolicy": "PreferDualStack", "ports": [{"port": 53, "protocol": "UDP"}]}})
    ips = dual.get("spec", {}).get("clusterIPs", [])
    check(code == 201 and len(ips) == 2 and in_net(ips[0], "10.96.0.0/12") and in_net(ips[1], "fd00:96::/108") and
          dual["spec"]["ipFamilies"] == ["IPv4", "IPv6"] and "nodePort" not in dual["spec"]["ports"][0],
          f"PreferDualStack: one address of each family ({ips}), no nodePort for a ClusterIP", dual.get("spec"))
    code, taken, _ = api("POST", f"/api/v1/namespaces/{NS}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "taken"},
        "spec": {"type": "NodePort", "clusterIP": spec.get("clusterIP"), "ports": [{"port": 80}]}})
    check(code == 422 and taken.get("reason") == "Invalid" and "already allocated" in taken.get("message", ""),
          "a clusterIP in use: 422 Invalid", taken)
    return svc


def tables(d, srv, api, svc):
    ip, np = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
    rc, out, err = kubectl(d, "get", "svc", "-n", NS, "web")
    header = out.splitlines()[0].split() if out else []
    check(rc == 0 and header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"] and
          row(out, "web")[:5] == ["web", "LoadBalancer", ip, "<pending>", f"80:{np}/TCP"],
          "kubectl get svc -n NS NAME: kube-apiserver's columns, EXTERNAL-IP <pending>", out + err)
    code, t, _ = api("GET", f"/api/v1/namespaces/{NS}/services/web", accept=TABLE)
    cells = (t.get("rows") or [{}])[0].get("cells", [])
    check(code == 200 and t.get("kind") == "Table" and t.get("apiVersion") == "meta.k8s.io/v1" and
          [c["name"] for c in t.get("columnDefinitions", [])] ==
          ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"] and
          cells[:5] == ["web", "LoadBalancer", ip, "<pending>", f"80:{np}/TCP"] and cells[6] == "app=web" and
          t["rows"][0]["object"]["kind"] == "PartialObjectMetadata",
          "as=Table: a meta.k8s.io/v1 Table, its rows' object a PartialObjectMetadata", t)
    code, t, _ = api("GET", f"/api/v1/namespaces/{NS}/services?includeObject=Object", accept=TABLE)
    objs = [r["object"] for r in t.get("rows", [])]
    check(code == 200 and len(objs) == 2 and all(o.get("kind") == "Service" and o.get("spec") for o in objs),
          "a namespace's LIST as a Table, includeObject=Object: the Services whole", objs)
    code, t, _ = api("GET", "/api/v1/services")
    check(code == 200 and t.get("kind") == "ServiceList", "without as=Table: the ServiceList", t.get("kind"))


def status_writes(d, srv, api, svc):
    path = f"/api/v1/namespaces/{NS}/services/web"
    rv0 = svc["metadata"]["resourceVersion"]
    watch = Watch(api, f"/api/v1/namespaces/{NS}/services", rv0)
    kw = KubectlWatch(d, "svc", "-n", NS, "web")
    wait_for(lambda: any("<pending>" in line for line in kw.lines), 10)
    code, st, _ = api("PATCH", path + "/status", {"metadata": {"resourceVersion": str(int(rv0) - 1)},
                                                  "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}},
                      MERGE)
    check(code == 409 and st.get("reason") == "Conflict" and st.get("message") ==
          'Operation cannot be fulfilled on services "web": the object has been modified; please apply your changes '
          "to the latest version and try again" and srv.get("services", f"{NS}/web") == svc,
          "a status PATCH with a stale resourceVersion: 409 Conflict, the object untouched", st)
    code, new, _ = api("PATCH", path + "/status", {
        "metadata": {"resourceVersion": rv0}, "spec": {"type": "ClusterIP", "ports": [{"port": 1}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}}, MERGE)
    rv1 = new.get("metadata", {}).get("resourceVersion", "0")
    check(code == 200 and int(rv1) > int(rv0) and
          dig(new, "status", "loadBalancer", "ingress") == [{"ip": "192.0.2.50"}],
          f"a status PATCH with the current resourceVersion: 200, the version bumped ({rv0} -> {rv1})", new)
    check(new.get("spec") == svc["spec"], "spec in a status PATCH is ignored (the status strategy keeps it)",
          new.get("spec"))
    check(wait_for(lambda: watch.of("MODIFIED", rv1), 5) and dig(watch.of("MODIFIED", rv1), 0, "object", "status") ==
          new.get("status"), "a watch of the namespace sees the MODIFIED event", watch.events)
    rc, out, err = kubectl(d, "get", "svc", "-n", NS, "web")
    check(rc == 0 and row(out, "web")[3:4] == ["192.0.2.50"], "kubectl get svc: EXTERNAL-IP is the ingress address",
          out + err)
    seen = wait_for(lambda: any(row(line, "web")[3:4] == ["192.0.2.50"] for line in kw.lines), 5)
    out = kw.stop()
    check(seen and row(out.splitlines()[1] if out.count("\n") > 1 else "", "web")[3:4] == ["<pending>"],
          "kubectl get svc -w: <pending>, then the address (the watch's events as Tables)", out)
    n, rv = len(watch.events), srv.store.rv
    code, same, _ = api("PATCH", path + "/status", {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}},
                        STRATEGIC)
    time.sleep(0.5)
    check(code == 200 and dig(same, "metadata", "resourceVersion") == rv1 and srv.store.rv == rv and
          len(watch.events) == n,
          "a status PATCH that changes nothing (strategic merge): 200, no new version, no event",
          (code, same.get("metadata"), srv.store.rv, rv, watch.events[n:]))
    code, put, _ = api("PUT", path, dict(new, metadata=dict(new["metadata"], labels={"edited": "yes"}),
                                         status={"loadBalancer": {}}))
    check(code == 200 and dig(put, "metadata", "labels") == {"edited": "yes"} and put.get("status") == new["status"],
          "a PUT of the object takes the labels and keeps the stored status", put)
    code, stale, _ = api("PUT", path, new)
    check(code == 409 and stale.get("reason") == "Conflict", "a PUT with a stale resourceVersion: 409", stale)
    code, j, _ = api("PATCH", path, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}],
                     "application/json-patch+json")
    check(code == 415, "a json-patch: 415", (code, j))

    # Another writer gets in first: a new version (MODIFIED, nothing else changed), then 409.
    before = srv.get("services", f"{NS}/web")
    srv.conflict_next("services", f"{NS}/web")
    rv = before["metadata"]["resourceVersion"]
    code, lost, _ = api("PATCH", path + "/status", {"metadata": {"resourceVersion": rv},
                                                    "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.51"}]}}},
                        MERGE)
    after = srv.get("services", f"{NS}/web")
    rv2 = after["metadata"]["resourceVersion"]
    check(code == 409 and lost.get("reason") == "Conflict" and int(rv2) == int(rv) + 1 and
          dict(after, metadata=before["metadata"]) == before,
          "conflict_next: 409, the object at a new version and otherwise unchanged", (code, lost, rv2))
    check(wait_for(lambda: watch.of("MODIFIED", rv2), 5), "conflict_next: the other writer's MODIFIED event is watched",
          watch.events[-2:])
    code, won, _ = api("PATCH", path + "/status", {"metadata": {"resourceVersion": rv2},
                                                   "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.51"}]}}},
                       MERGE)
    check(code == 200 and dig(won, "status", "loadBalancer", "ingress") == [{"ip": "192.0.2.51"}],
          "conflict_next: the retry with the new version succeeds", (code, won.get("status")))
    st_writes = srv.writes_for("services", f"{NS}/web", "status")
    own = [(w["method"], w["code"]) for w in srv.writes_for("services", f"{NS}/web", "")]
    check([w["code"] for w in st_writes] == [409, 200, 200, 409, 200] and
          all(w["method"] == "PATCH" and w["subresource"] == "status" for w in st_writes) and
          own == [("POST", 201), ("POST", 409), ("PUT", 200), ("PUT", 409), ("PATCH", 415)],
          "writes_for: the status writes and the object's, with their codes", (st_writes, own))
    return watch


def leases_and_events(d, srv, api):
    base = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    code, lease, _ = api("POST", base, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "svcgate-lb"},
                                        "spec": {"holderIdentity": "gw-1", "leaseDurationSeconds": 15}})
    check(code == 201 and lease["metadata"]["namespace"] == NS, "a Lease created (POST): 201", lease)
    code, got, _ = api("GET", base + "/svcgate-lb")
    check(code == 200 and got == lease, "and read back (GET)", got)
    taken = dict(got, spec=dict(got["spec"], holderIdentity="gw-2", leaseTransitions=1))
    code, upd, _ = api("PUT", base + "/svcgate-lb", taken)
    check(code == 200 and dig(upd, "spec", "holderIdentity") == "gw-2" and
          int(upd["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"]),
          "updated (PUT with its resourceVersion): a new version", upd)
    code, st, _ = api("PUT", base + "/svcgate-lb", dict(got, spec=dict(got["spec"], holderIdentity="gw-3")))
    check(code == 409 and 'leases.coordination.k8s.io "svcgate-lb"' in st.get("message", ""),
          "a PUT from the stale version: 409 Conflict naming leases.coordination.k8s.io", st)
    rc, out, err = kubectl(d, "get", "lease", "-A")
    check(rc == 0 and row(out, "svcgate-lb")[:3] == [NS, "svcgate-lb", "gw-2"],
          "kubectl get lease -A: NAMESPACE NAME HOLDER AGE", out + err)

    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "web."},
             "involvedObject": {"kind": "Service", "namespace": NS, "name": "web", "apiVersion": "v1"},
             "reason": "IPAllocated", "message": "Assigned 192.0.2.51", "type": "Normal",
             "source": {"component": "svcgate-lb"}, "count": 1, "firstTimestamp": kube_apiserver.now_rfc3339(),
             "lastTimestamp": kube_apiserver.now_rfc3339()}
    code, ev, _ = api("POST", f"/api/v1/namespaces/{NS}/events", event)
    name = ev.get("metadata", {}).get("name", "")
    check(code == 201 and name.startswith("web.") and len(name) == len("web.") + 5 and
          ev.get("reason") == "IPAllocated",
          f"an Event POSTed with generateName: 201, named {name}", ev)
    code, mine, _ = api("GET", f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3Dweb")
    code2, none, _ = api("GET", "/api/v1/namespaces/default/events")
    check(code == 200 and [o["metadata"]["name"] for o in mine.get("items", [])] == [name] and
          code2 == 200 and none.get("items") == [], "LIST per namespace: its events alone", (mine, none))
    rc, out, err = kubectl(d, "get", "events", "-A")
    check(rc == 0 and row(out, "IPAllocated")[:1] == [NS] and "service/web" in out and "Assigned 192.0.2.51" in out,
          "kubectl get events -A: the Event's namespace, reason, object and message", out + err)


def deletes(d, srv, api, watch):
    rc, out, err = kubectl(d, "get", "svc", "-A")
    check(rc == 0 and out.splitlines()[0].split()[0] == "NAMESPACE" and row(out, "web")[:1] == [NS],
          "kubectl get svc -A: a NAMESPACE column", out + err)
    rc, out, err = kubectl(d, "get", "svc", "-n", NS, "web", "-o", "yaml")
    check(rc == 0 and "kind: Service" in out and "192.0.2.51" in out and "nodePort:" in out,
          "kubectl get svc -o yaml: the object", out + err)
    rc, out, err = kubectl(d, "delete", "svc", "-n", NS, "web")
    check(rc == 0 and 'service "web" deleted' in out and srv.get("services", f"{NS}/web") is None,
          "kubectl delete svc: deleted", out + err)
    w = srv.writes_for("services", f"{NS}/web", "")[-1]
    check(w["method"] == "DELETE" and w["code"] == 200, "the DELETE is recorded, 200", w)
    check(wait_for(lambda: watch.of("DELETED"), 5), "the watch sees DELETED", watch.events[-1:])
    code, st, _ = api("DELETE", f"/api/v1/namespaces/{NS}/services/web")
    check(code == 404 and st.get("reason") == "NotFound" and st.get("message") == 'services "web" not found',
          "a DELETE of what is gone: 404 NotFound", st)

    srv.fail_writes, srv.retry_after = 429, 3
    try:
        code, st, headers = api("POST", f"/api/v1/namespaces/{NS}/services", {"apiVersion": "v1", "kind": "Service",
                                                                            "metadata": {"name": "late"}})
    finally:
        srv.fail_writes, srv.retry_after = None, None
    check(code == 429 and headers.get("Retry-After") == "3" and srv.get("services", f"{NS}/late") is None and
          srv.writes[-1]["code"] == 429, "fail_writes 429 with retry_after 3: refused, Retry-After: 3, recorded",
          (code, st, headers.get("Retry-After")))
    by_cert = Api(srv, token=None, cert=(f"{srv.dir}/client.crt", f"{srv.dir}/client.key"))
    code, _, _ = by_cert("DELETE", f"/api/v1/namespaces/{NS}/services/dual")
    check(code == 200 and srv.writes[-1]["who"] == "svcgate", "a write with a client certificate: who is its CN",
          srv.writes[-1])


def discovery(d, srv, api):
    code, core, _ = api("GET", "/api/v1")
    res = {r["name"]: r for r in core.get("resources", [])}
    check(code == 200 and res.get("services", {}).get("shortNames") == ["svc"] and "services/status" in res and
          res.get("namespaces", {}).get("namespaced") is False and res.get("events", {}).get("shortNames") == ["ev"],
          "/api/v1: services (svc) and services/status, namespaces cluster-scoped, events (ev)", sorted(res))
    code, coord, _ = api("GET", "/apis/coordination.k8s.io/v1")
    check(code == 200 and [(r["name"], r["singularName"], r["namespaced"]) for r in coord.get("resources", [])] ==
          [("leases", "lease", True)], "/apis/coordination.k8s.io/v1: leases", coord)
    rc, out, err = kubectl(d, "api-resources")
    check(rc == 0 and all(n in out for n in ("leases", "endpointslices", "servicecidrs", "namespaces")),
          "kubectl api-resources lists every kind served", out + err)


def main(d):
    rc, out, err = kubectl(d, "version", "--client", "--short")
    check(rc == 0, f"kubectl at {KUBECTL} runs: {out.strip()}", err)
    srv = kube_apiserver.Server(d, bookmark_seconds=1.0)
    srv.kubeconfig(f"{d}/kubeconfig")
    api = Api(srv)
    try:
        namespaces(d, srv, api)
        svc = create_service(d, srv, api)
        if check(dig(svc, "spec", "ports", 0, "nodePort"), "the Service is there for the checks that follow"):
            tables(d, srv, api, svc)
            watch = status_writes(d, srv, api, srv.get("services", f"{NS}/web"))
            leases_and_events(d, srv, api)
            deletes(d, srv, api, watch)
        discovery(d, srv, api)
    finally:
        srv.stop()


t0 = time.monotonic()
with tempfile.TemporaryDirectory() as tmp:
    main(tmp)
print(f"took {time.monotonic() - t0:.1f} s")
checks.finish("the tests' API server for a LoadBalancer controller and kubectl")
