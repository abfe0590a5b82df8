"""A Kubernetes API server of the tests' own, for what svcgate's client (control/kube/), a
LoadBalancer controller (client-go style) and kubectl rely on: no kube-apiserver can be installed
on Debian 12, so this one follows the API conventions as a real one serves them, for Services,
Namespaces, Events and Nodes (core/v1), EndpointSlices (discovery.k8s.io/v1), ServiceCIDRs
(networking.k8s.io/v1) and Leases (coordination.k8s.io/v1); Nodes, ServiceCIDRs and Namespaces
are cluster-scoped:

  - HTTPS, with a CA, a server certificate (SAN 127.0.0.1) and a client certificate made at start
    by openssl; a bearer token or a client certificate signed by the CA authenticates (401
    otherwise, as a Status object);
  - LIST with limit and continue (pages of one consistent snapshot; an expired continue token or
    a compacted resourceVersion is 410 Gone), items without kind/apiVersion, as a typed list;
  - WATCH (?watch=1) as a chunked stream of {"type", "object"} lines from resourceVersion on:
    ADDED, MODIFIED, DELETED, a BOOKMARK every bookmark_seconds (60, a real server's minute) with
    allowWatchBookmarks, ended after timeoutSeconds; from "0" or "" the current objects first as
    synthetic ADDED events; a resourceVersion older than the kept history is answered with an
    ERROR event holding a 410 Status (gone_as_status=True: HTTP 410 instead); one newer than the
    server's is waited for 3 s, then answered 504 "Too large resource version" (Retry-After 1), as
    the watch cache does;
  - both at a kind's cluster-wide path (/api/v1/services) and per namespace
    (/api/v1/namespaces/NS/services);
  - continue tokens expire with compaction (410 Expired);
  - served under a path prefix (prefix="/k8s/clusters/c-1"), on IPv6 (host="::1"); the server's
    certificate names 127.0.0.1, ::1 and kube.test in its subjectAltNames, not in its CN;
  - label selectors: key, !key, key=value, key!=value, comma-separated; field selectors on
    metadata.name and metadata.namespace (=, ==, !=), and an Event's involvedObject.*, reason,
    type and source;
  - a kind in `missing` is not served (404, as an older cluster without ServiceCIDRs; not in
    discovery either);
  - every write bumps one resourceVersion counter and stamps the object.

Writes, as kube-apiserver answers them, each a watch event:

  - POST to a collection (/api/v1/namespaces/NS/services, /api/v1/namespaces, ...): 201 with the
    object stamped (uid, creationTimestamp), generateName honoured, the namespace the path's (400
    if the body names another), 409 AlreadyExists. A Service gets the server's defaults: type
    ClusterIP, a clusterIP from 10.96.0.0/12 (and one from fd00:96::/108 for PreferDualStack or
    RequireDualStack), nodePorts from 30000-32767 for NodePort and LoadBalancer (unless
    allocateLoadBalancerNodePorts is false), protocol TCP, targetPort the port, the traffic
    policies Cluster, sessionAffinity None, status {loadBalancer: {}}; an address or port in use
    or out of range is 422. A Namespace gets phase Active (no namespace needs to exist to hold
    objects: no NamespaceLifecycle admission).
  - GET, PUT, PATCH and DELETE of one object, GET, PUT and PATCH of its status (Services, Nodes,
    Namespaces, ServiceCIDRs). A resourceVersion in a PUT's body or a PATCH's metadata is a
    precondition: another one is 409 Conflict. A write to the object keeps its status; one to
    status keeps its spec (takes status, labels and annotations). A write that changes nothing
    keeps the version and sends no event. PATCH: merge-patch+json (RFC 7386), and
    strategic-merge-patch+json applied as a merge patch (lists replaced whole; one with $
    directives, as kubectl apply sends, is 415, as is json-patch). DELETE: a Status Success; a
    Namespace goes at once with what it holds.
  - an Accept with as=Table (kubectl get, -w too) gets meta.k8s.io Tables: kube-apiserver's
    columns and cells for each kind (Services: NAME, TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE,
    SELECTOR), rows' object as includeObject asks (PartialObjectMetadata by default).
  - discovery: /version, /api, /api/v1, /apis, /apis/GROUP[/v1] (short names, status
    subresources), and /openapi/v2 without definitions (protobuf when asked, as kubectl 1.20's
    validation asks: so it validates nothing client-side).

The tests drive it from Python: put/delete objects, compact the history, drop every stream,
restart with a new history, stall the watches (no byte, no end), send raw lines (garbage) into
them, hold a kind's LIST until released, count the reads (in a time window too), read the
clients' writes (`writes`, `writes_for`) and the objects (`get`), and make it misbehave as broken
servers and proxies do: every WATCH closed at once or answered with one code (with a Retry-After),
every continue token expired, every write answered with one code (`fail_writes`), an object's
next writes beaten by another writer (`conflict_next`).

Run alone (python3 kube_apiserver.py DIR [OBJECTS.yaml]) it serves the objects and writes
DIR/kubeconfig, for a look with kubectl or svcgate."""
import base64
import bisect
import copy
import datetime
import http.server
import ipaddress
import json
import os
import random
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

KINDS = {
    "services": ("/api/v1/services", "Service", "v1"),
    "endpointslices": ("/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice", "discovery.k8s.io/v1"),
    "nodes": ("/api/v1/nodes", "Node", "v1"),
    "servicecidrs": ("/apis/networking.k8s.io/v1/servicecidrs", "ServiceCIDR", "networking.k8s.io/v1"),
    "namespaces": ("/api/v1/namespaces", "Namespace", "v1"),
    "leases": ("/apis/coordination.k8s.io/v1/leases", "Lease", "coordination.k8s.io/v1"),
    "events": ("/api/v1/events", "Event", "v1"),
}
CLUSTER_SCOPED = {"nodes", "servicecidrs", "namespaces"}
# Discovery's singular name, short names and subresources of each kind (a write to status keeps
# the spec, one to the object keeps the status).
RESOURCES = {
    "services": ("service", ["svc"], ["status"]),
    "endpointslices": ("endpointslice", [], []),
    "nodes": ("node", ["no"], ["status"]),
    "servicecidrs": ("servicecidr", [], ["status"]),
    "namespaces": ("namespace", ["ns"], ["status"]),
    "leases": ("lease", [], []),
    "events": ("event", ["ev"], []),
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]  # no deletecollection
VERSION = {"major": "1", "minor": "35", "gitVersion": "v1.35.0", "gitCommit": "0" * 40, "gitTreeState": "clean",
           "buildDate": "2025-12-17T00:00:00Z", "goVersion": "go1.25.5", "compiler": "gc", "platform": "linux/amd64"}
SERVICE_CIDRS = {"IPv4": "10.96.0.0/12", "IPv6": "fd00:96::/108"}
NODE_PORTS = (30000, 32767)
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict",
           410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


def pb(field, data):
    """A protobuf length-delimited field."""
    n, size = len(data), b""
    while n >= 0x80:
        size += bytes([n & 0x7F | 0x80])
        n >>= 7
    return bytes([field << 3 | 2]) + size + bytes([n]) + data


# /openapi/v2: an openapi_v2.Document (gnostic's OpenAPIv2.proto: swagger 1, info 2 {title 1,
# version 2}, paths 8, definitions 9) with no paths and no definitions: kubectl's validation finds
# no schema for any kind and lets every object through, as it does for a kind a server does not
# describe.
OPENAPI = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]}, "paths": {},
           "definitions": {}}
OPENAPI_PB = pb(1, b"2.0") + pb(2, pb(1, b"Kubernetes") + pb(2, VERSION["gitVersion"].encode())) + pb(8, b"") + \
    pb(9, b"")


def kind_of(obj):
    for name, (_, kind, _) in KINDS.items():
        if obj.get("kind") == kind:
            return name
    raise ValueError(f"not a kind this server serves: {obj.get('kind')}")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


# P-256 keys, as kubeadm makes with --encryption-algorithm ECDSA-P256: an RSA 2048 key took the
# tests' 114 calls of openssl 17.6 s of CPU (process accounting, one fresh run of tools/test).
EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def sign(d, name, cn, ext, ca="ca"):
    """A key and a certificate `name` in d for `cn` with extensions `ext`, signed by CA `ca` of d."""
    openssl("req", *EC_KEY, "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{d}/{name}.key",
            "-out", f"{d}/{name}.csr")
    with open(f"{d}/{name}.ext", "w") as f:
        f.write(ext + "\n")
    openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{ca}.crt", "-CAkey", f"{d}/{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")


def make_certs(d, san="IP:127.0.0.1,IP:::1,DNS:kube.test", cn="not-a-name"):
    """A CA, a server certificate and a client certificate (CN svcgate), in d. The server's name is
    its subjectAltNames (kube.test: a name only a proxy resolves); its CN is not a name a client
    should accept (Go ignores it)."""
    openssl("req", "-x509", *EC_KEY, "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt")
    sign(d, "server", cn, f"subjectAltName={san}")
    sign(d, "client", "svcgate", "extendedKeyUsage=clientAuth")


def make_client_chain(d):
    """In d (which holds a CA): an intermediate CA signed by it and a client certificate signed by
    the intermediate; chain.crt holds the client's certificate then the intermediate's, leaf.crt
    the client's alone, leaf.key its key."""
    sign(d, "intermediate", "test-intermediate", "basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign")
    sign(d, "leaf", "svcgate-leaf", "extendedKeyUsage=clientAuth", ca="intermediate")
    with open(f"{d}/chain.crt", "w") as f:
        f.write(open(f"{d}/leaf.crt").read() + open(f"{d}/intermediate.crt").read())


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def selector_matches(sel, labels):
    for term in filter(None, (sel or "").split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.rstrip("=")) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def fields_match(sel, obj):
    """A field selector on metadata.name / metadata.namespace (and an Event's involvedObject.*,
    reason, type, source), as the API server takes them."""
    meta = obj.get("metadata", {})
    fields = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
    if "involvedObject" in obj:
        fields.update({"involvedObject." + k: str(v) for k, v in obj["involvedObject"].items()})
        fields.update(reason=obj.get("reason", ""), type=obj.get("type", ""),
                      source=(obj.get("source") or {}).get("component", ""))
    for term in filter(None, (sel or "").split(",")):
        neg = "!=" in term
        k, v = term.split("!=" if neg else "=", 1)
        if (fields.get(k.rstrip("="), "") == v.lstrip("=")) == neg:
            return False
    return True


def status(code, reason, message, details=None):
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code}
    if details:
        out["details"] = details
    return out


def group_of(kind):
    api = KINDS[kind][2]
    return api.split("/")[0] if "/" in api else ""


def qualified(kind):
    """The resource as the server's messages name it: services, leases.coordination.k8s.io."""
    return f"{kind}.{group_of(kind)}" if group_of(kind) else kind


def object_status(code, reason, kind, name, message):
    details = {"name": name, "kind": kind, **({"group": group_of(kind)} if group_of(kind) else {})}
    return status(code, reason, message, details)


def not_found(kind, name):
    return object_status(404, "NotFound", kind, name, f'{qualified(kind)} "{name}" not found')


def conflict(kind, name):
    return object_status(409, "Conflict", kind, name, f'Operation cannot be fulfilled on {qualified(kind)} "{name}": '
                         "the object has been modified; please apply your changes to the latest version and try again")


def invalid(kind, name, field, message):
    """422: a field the kind's validation refuses."""
    out = object_status(422, "Invalid", kind, name, f'{KINDS[kind][1]} "{name}" is invalid: {field}: {message}')
    out["details"]["causes"] = [{"reason": "FieldValueInvalid", "message": message, "field": field}]
    return out


def key_of(kind, ns, name):
    return name if kind in CLUSTER_SCOPED else f"{ns}/{name}"


def route(path):
    """(kind, namespace, name, subresource) of an API path, each part None when absent
    (/api/v1/services: all namespaces), or None when no kind's."""
    for kind, (base, _, _) in KINDS.items():
        head, _, plural = base.rpartition("/")
        if path == base:
            return kind, None, None, None
        if kind not in CLUSTER_SCOPED and path.startswith(head + "/namespaces/"):
            parts = path[len(head + "/namespaces/"):].split("/")
            if 2 <= len(parts) <= 4 and parts[1] == plural and all(parts):
                return kind, parts[0], (parts + [None])[2], (parts + [None, None])[3]
    for kind in CLUSTER_SCOPED:
        base = KINDS[kind][0]
        parts = path[len(base) + 1:].split("/") if path.startswith(base + "/") else []
        if 1 <= len(parts) <= 2 and all(parts):
            return kind, None, parts[0], (parts + [None])[1]
    return None


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def merge_patch(target, patch):
    """RFC 7386: objects merged key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def directives(patch):
    """Whether a strategic merge patch holds $patch, $retainKeys, $setElementOrder/... (kubectl
    apply's), which a merge patch cannot honour."""
    if isinstance(patch, dict):
        return any(k.startswith("$") or directives(v) for k, v in patch.items())
    return isinstance(patch, list) and any(directives(v) for v in patch)


# --- what the server fills in on a Service ----------------------------------------------------
def family(ip):
    return "IPv6" if ":" in ip else "IPv4"


def free_ip(cidr, used):
    """A free address of cidr at random, past the band at its start that kube-apiserver's
    allocator keeps for addresses asked for by name."""
    net = ipaddress.ip_network(cidr)
    band, last = min(max(16, net.num_addresses // 16), 256), net.num_addresses - 2
    for _ in range(100):
        ip = str(net.network_address + random.randint(band, last))
        if ip not in used:
            return ip
    return next(ip for ip in (str(net.network_address + i) for i in range(1, last + 1)) if ip not in used)


def free_port(used):
    lo, hi = NODE_PORTS
    band = min(max(16, (hi - lo + 1) // 32), 128)
    for _ in range(100):
        port = random.randint(lo + band, hi)
        if port not in used:
            return port
    return next(p for p in range(lo, hi + 1) if p not in used)


def service_defaults(svc, others, cidrs, old=None):
    """Defaults and allocations of kube-apiserver on a Service it stores; others: the other
    Services, cidrs: the service CIDRs an address asked for must be in. An update keeps what was
    allocated and the update leaves out. Returns (field, message) of a refusal (422), or None."""
    spec = svc.setdefault("spec", {})
    ospec = (old or {}).get("spec", {})
    typ = spec.setdefault("type", "ClusterIP")
    ports = spec.get("ports") or []
    spec.setdefault("sessionAffinity", "None")
    for p in ports:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    if typ == "ExternalName":
        return None
    node_ports = typ == "NodePort" or typ == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    if old and ospec.get("type") != "ExternalName":
        for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(f) and ospec.get(f):
                spec[f] = copy.deepcopy(ospec[f])
        had = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in ospec.get("ports") or []}
        for p in ports:
            if node_ports and not p.get("nodePort") and had.get((p.get("port"), p["protocol"])):
                p["nodePort"] = had[(p.get("port"), p["protocol"])]
            elif typ == "ClusterIP" and p.get("nodePort") == had.get((p.get("port"), p["protocol"])):
                p.pop("nodePort", None)  # a type changed to ClusterIP drops what came with the other
        gone = ({"externalTrafficPolicy"} if typ == "ClusterIP" else set()) | (
            {"healthCheckNodePort", "allocateLoadBalancerNodePorts"} if typ != "LoadBalancer" else set())
        for f in gone:
            if f in spec and spec[f] == ospec.get(f):
                del spec[f]
        if ospec.get("clusterIP") and spec.get("clusterIP") != ospec["clusterIP"]:
            return "spec.clusterIPs[0]", "may not change once set"
    spec.setdefault("internalTrafficPolicy", "Cluster")
    if typ in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if typ == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    policy = spec.setdefault("ipFamilyPolicy", "SingleStack")
    ips = list(spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else []))
    if spec.get("clusterIP") and ips[0] != spec["clusterIP"]:
        return "spec.clusterIPs", "must match clusterIP"
    if ips[:1] == ["None"]:  # headless
        spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
        spec.setdefault("ipFamilies", ["IPv4"])
    else:
        fams = list(spec.get("ipFamilies") or [family(ip) for ip in ips] or ["IPv4"])
        if policy == "SingleStack":
            fams = fams[:1]
        elif len(fams) == 1:
            fams.append("IPv6" if fams[0] == "IPv4" else "IPv4")
        used = {ip for o in others for ip in (o.get("spec") or {}).get("clusterIPs") or
                [(o.get("spec") or {}).get("clusterIP")]}
        for i, fam in enumerate(fams):
            if i >= len(ips):
                ips.append(free_ip(SERVICE_CIDRS[fam], used))
                continue
            try:
                addr = ipaddress.ip_address(ips[i])
            except ValueError:
                return f"spec.clusterIPs[{i}]", f'Invalid value: "{ips[i]}": must be a valid IP address'
            if family(ips[i]) != fam:
                return f"spec.clusterIPs[{i}]", f'Invalid value: "{ips[i]}": expected an {fam} address'
            if not any(addr in ipaddress.ip_network(c) for c in cidrs if family(c) == fam):
                return f"spec.clusterIPs[{i}]", f'Invalid value: "{ips[i]}": failed to allocate IP {ips[i]}: ' \
                    "provided IP is not in the valid range"
            if ips[i] in used:
                return f"spec.clusterIPs[{i}]", f'Invalid value: "{ips[i]}": failed to allocate IP {ips[i]}: ' \
                    "provided IP is already allocated"
        spec["clusterIP"], spec["clusterIPs"], spec["ipFamilies"] = ips[0], ips[:len(fams)], fams
    used = {p.get("nodePort") for o in others for p in o.get("spec", {}).get("ports") or []} | \
        {o.get("spec", {}).get("healthCheckNodePort") for o in others}
    for i, p in enumerate(ports):
        if p.get("nodePort"):
            field = f"spec.ports[{i}].nodePort"
            if typ == "ClusterIP":
                return field, f"Forbidden: may not be used when `type` is 'ClusterIP'"
            if not NODE_PORTS[0] <= p["nodePort"] <= NODE_PORTS[1]:
                return field, f"Invalid value: {p['nodePort']}: provided port is not in the valid range. " \
                    f"The range of valid ports is {NODE_PORTS[0]}-{NODE_PORTS[1]}"
            if p["nodePort"] in used:
                return field, f"Invalid value: {p['nodePort']}: provided port is already allocated"
    used |= {p.get("nodePort") for p in ports}
    for p in ports:
        if node_ports and not p.get("nodePort"):
            p["nodePort"] = free_port(used)
            used.add(p["nodePort"])
    if typ == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local" and not spec.get("healthCheckNodePort"):
        spec["healthCheckNodePort"] = free_port(used)
    return None


# --- tables, as kube-apiserver prints its kinds (pkg/printers/internalversion) -------------------
def column(name, fmt="", priority=0):
    return {"name": name, "type": "string", "format": fmt, "description": "", "priority": priority}


NAME, AGE = column("Name", "name"), column("Age")
COLUMNS = {
    "services": [NAME, column("Type"), column("Cluster-IP"), column("External-IP"), column("Port(s)"), AGE,
                 column("Selector", priority=1)],
    "endpointslices": [NAME, column("AddressType"), column("Ports"), column("Endpoints"), AGE],
    "nodes": [NAME, column("Status"), column("Roles"), AGE, column("Version")] +
             [column(c, priority=1) for c in ("Internal-IP", "External-IP", "OS-Image", "Kernel-Version",
                                             "Container-Runtime")],
    "servicecidrs": [NAME, column("CIDRs"), AGE],
    "namespaces": [NAME, column("Status"), AGE],
    "leases": [NAME, column("Holder"), AGE],
    "events": [column("Last Seen"), column("Type"), column("Reason"), column("Object"),
               column("Subobject", priority=1), column("Source", priority=1), column("Message"),
               column("First Seen", priority=1), column("Count", priority=1), column("Name", "name", 1)],
}


def human_duration(seconds):
    """k8s.io/apimachinery's duration.HumanDuration."""
    s = int(seconds)
    m, h = s // 60, s // 3600
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 192:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        return f"{h // 24 // 365}y{h // 24 % 365}d" if h // 24 % 365 else f"{h // 24 // 365}y"
    return f"{h // 24 // 365}y"


def age(ts):
    try:
        t = datetime.datetime.strptime((ts or "")[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())


def first_three(items):
    """The printers' list of at most three, then " + N more...", or <unset>."""
    text = ",".join(items[:3])
    return f"{text} + {len(items) - 3} more..." if len(items) > 3 else text or "<unset>"


def cells(kind, o):
    """A table row's cells for o, wide (as the server makes them; kubectl leaves out the
    columns of priority 1 unless -o wide)."""
    meta, spec, st = o.get("metadata", {}), o.get("spec") or {}, o.get("status") or {}
    name, created = meta.get("name", ""), age(meta.get("creationTimestamp"))
    if kind == "services":
        typ, ext = spec.get("type", "ClusterIP"), spec.get("externalIPs") or []
        ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else ["<none>"])
        if typ in ("ClusterIP", "NodePort"):
            external = ",".join(ext) or "<none>"
        elif typ == "LoadBalancer":
            lb = sorted({i.get("ip") or i.get("hostname") for i in (st.get("loadBalancer") or {}).get("ingress") or []
                         if i.get("ip") or i.get("hostname")})
            external = ",".join(lb + ext) or "<pending>"
        else:
            external = spec.get("externalName", "") if typ == "ExternalName" else "<unknown>"
        ports = ",".join(f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort") else
                         f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
        selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or "<none>"
        return [name, typ, ips[0], external, ports, created, selector]
    if kind == "endpointslices":
        ports = [str(p["port"]) if p.get("port") is not None else p.get("name") or "*" for p in o.get("ports") or []]
        addrs = [a for e in o.get("endpoints") or [] for a in e.get("addresses") or []]
        return [name, o.get("addressType", ""), first_three(ports), first_three(addrs), created]
    if kind == "nodes":
        ready = [c for c in st.get("conditions") or [] if c.get("type") == "Ready"]
        state = ["Ready" if ready[0].get("status") == "True" else "NotReady"] if ready else ["Unknown"]
        state += ["SchedulingDisabled"] if spec.get("unschedulable") else []
        labels = meta.get("labels") or {}
        roles = {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")} - {""}
        roles = sorted(roles | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
        info = st.get("nodeInfo") or {}
        addrs = [next((a["address"] for a in st.get("addresses") or [] if a.get("type") == t), "<none>")
                 for t in ("InternalIP", "ExternalIP")]
        return [name, ",".join(state), ",".join(roles) or "<none>", created, info.get("kubeletVersion", "")] + addrs + \
            [info.get(k) or "<unknown>" for k in ("osImage", "kernelVersion", "containerRuntimeVersion")]
    if kind == "servicecidrs":
        return [name, ",".join(spec.get("cidrs") or []), created]
    if kind == "namespaces":
        return [name, st.get("phase", ""), created]
    if kind == "leases":
        return [name, spec.get("holderIdentity") or "", created]
    # events
    first = age(o.get("firstTimestamp") or o.get("eventTime"))
    last, count = age(o["lastTimestamp"]) if o.get("lastTimestamp") else first, o.get("count") or 1
    if o.get("series"):
        last, count = age(o["series"].get("lastObservedTime")), o["series"].get("count", count)
    inv, src = o.get("involvedObject") or {}, o.get("source") or {}
    target = inv.get("kind", "").lower() + (f"/{inv['name']}" if inv.get("name") else "")
    component = src.get("component") or o.get("reportingComponent", "")
    host = src.get("host") or o.get("reportingInstance", "")
    return [last, o.get("type", ""), o.get("reason", ""), target, inv.get("fieldPath", ""),
            f"{component}, {host}" if host else component, (o.get("message") or "").strip(), first, count, name]


def table_version(accept):
    """meta.k8s.io's version of the Table an Accept header asks for (kubectl get's
    "application/json;as=Table;v=v1;g=meta.k8s.io,..."), or None."""
    for part in accept.split(","):
        p = dict(kv.strip().split("=", 1) for kv in part.split(";")[1:] if "=" in kv)
        if p.get("as") == "Table" and p.get("g") == "meta.k8s.io" and p.get("v") in ("v1", "v1beta1"):
            return p["v"]
    return None


def as_table(kind, objs, meta, include, version):
    """A meta.k8s.io Table of objs; each row's object as includeObject asks: Object, None, or
    (the default) Metadata, a PartialObjectMetadata."""
    _, k, api = KINDS[kind]
    rows = []
    for o in objs:
        full = dict(o, kind=k, apiVersion=api)
        obj = full if include == "Object" else None if include == "None" else {
            "kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}", "metadata": o.get("metadata", {})}
        rows.append({"cells": cells(kind, full), "object": obj})
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta,
            "columnDefinitions": COLUMNS[kind], "rows": rows}


class Store:
    """Objects by kind and namespace/name, one resourceVersion counter, the event history."""

    def __init__(self, first_rv=1):
        self.cv = threading.Condition()
        self.rv = first_rv
        self.oldest = first_rv  # watches from before this get 410
        self.epoch = 0  # a restart: streams of an older epoch end
        self.objects = {k: {} for k in KINDS}
        self.history = []  # (rv, kind, type, object), by rv
        self.rvs = []  # the history's versions, for bisect

    def put(self, obj):
        obj = copy.deepcopy(obj)
        kind = kind_of(obj)
        meta = obj.setdefault("metadata", {})
        if kind in CLUSTER_SCOPED:
            key = meta["name"]
        else:
            meta.setdefault("namespace", "default")
            key = f"{meta['namespace']}/{meta['name']}"
        with self.cv:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            typ = "MODIFIED" if key in self.objects[kind] else "ADDED"
            self.objects[kind][key] = obj
            self.history.append((self.rv, kind, typ, obj))
            self.rvs.append(self.rv)
            self.cv.notify_all()
        return obj

    def delete(self, kind, key):
        with self.cv:
            obj = self.objects[kind].pop(key)
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.history.append((self.rv, kind, "DELETED", obj))
            self.rvs.append(self.rv)
            self.cv.notify_all()

    def compact(self):
        """Forget the history: a watch from any version seen so far gets 410 (and the server's
        continue tokens expire with it)."""
        with self.cv:
            self.history.clear()
            self.rvs.clear()
            self.oldest = self.rv + 1
            self.cv.notify_all()


class Server:
    def __init__(self, d, tokens=("test-token",), gone_as_status=False, bookmark_seconds=60.0, prefix="",
                 host="127.0.0.1", certs=None, port=0):
        self.dir = certs or d
        if not certs:  # the server's certificate names the address it listens on
            make_certs(d, **({} if host in ("127.0.0.1", "::1") else
                             {"san": f"IP:127.0.0.1,IP:::1,DNS:kube.test,IP:{host}"}))
        self.listen_port = port
        self.prefix = prefix  # served under this path ("/k8s/clusters/c-1"), as behind Rancher
        self.host = host
        self.tokens = set(tokens)
        self.token_prefixes = []  # any token starting so is taken (an exec plugin's)
        self.gone_as_status = gone_as_status
        self.bookmark_seconds = bookmark_seconds
        self.store = Store()
        self.stall = False  # watches send nothing and do not end
        self.hold = {}  # kind -> threading.Event: its LIST waits until set
        self.missing = set()  # kinds answered 404 (not served by this "cluster")
        self.requests = []  # (method, path, query dict, monotonic time) of every authenticated request
        # Every write (POST, PUT, PATCH, DELETE): {method, path, kind, key, subresource (None: the
        # object), body (parsed JSON or None), code, who (the bearer token or the client
        # certificate's CN), time (monotonic)}.
        self.writes = []
        self.fail_writes = None  # an HTTP code every write is answered with (Retry-After: retry_after)
        self.conflicts = {}  # (kind, key) -> how many more writes to it lose to another writer
        # Faults a broken server or proxy shows: None, "close" (every WATCH answered 200 and ended
        # at once), or an HTTP code every WATCH is answered with; retry_after adds Retry-After.
        self.watch_fault = None
        self.retry_after = None
        self.expire_continues = False  # every continue token is 410 Expired (a slow LIST)
        self.raw = []  # (epoch, kind or None, bytes): lines to write into the open watches
        self.continues = {}  # token -> (rv, items)
        self.lock = threading.Lock()
        self.streams = 0  # watches open now
        self._start()

    # --- driving it --------------------------------------------------------------------------
    def put(self, obj):
        return self.store.put(obj)

    def delete(self, kind, key):
        self.store.delete(kind, key)

    def compact(self):
        self.store.compact()
        self.continues.clear()  # a continue token names a compacted version now

    def drop_streams(self):
        """Every open watch ends now, mid-stream (the connection is closed, no final chunk)."""
        with self.store.cv:
            self.store.epoch += 1
            self.store.cv.notify_all()

    def restart(self, objects=(), first_rv=1):
        """A new server with its history gone: new objects, versions from first_rv again."""
        store = Store(first_rv)
        for o in objects:
            store.put(o)
        old = self.store
        self.store = store
        with old.cv:
            old.epoch += 1
            old.cv.notify_all()
        self.continues.clear()

    def send_raw(self, data, kind=None):
        """Writes data (bytes, e.g. garbage or half an event) into the open watches of kind (all if
        None); data given as (bytes, "cut") ends the stream right after the bytes, without the
        final chunk."""
        with self.store.cv:
            self.raw.append((kind, data))
            self.store.cv.notify_all()

    def count(self, kind, watch=None):
        """Requests for kind at its cluster-wide path so far (LIST pages, WATCHes, or both; a
        write, such as a Namespace's POST, is no read)."""
        path = KINDS[kind][0]
        return sum(1 for m, p, q, _ in self.requests
                   if m == "GET" and p == path and (watch is None or (q.get("watch") in ("1", "true")) == watch))

    def count_since(self, kind, since, watch=None):
        """The same, for requests made at or after monotonic time `since`."""
        path = KINDS[kind][0]
        return sum(1 for m, p, q, t in self.requests if t >= since and m == "GET" and p == path and
                   (watch is None or (q.get("watch") in ("1", "true")) == watch))

    def get(self, kind, key):
        """A copy of the object kind/key (namespace/name, or name if cluster-scoped), or None."""
        with self.store.cv:
            return copy.deepcopy(self.store.objects[kind].get(key))

    def writes_for(self, kind, key, subresource=None):
        """The writes to one object: all of them (subresource None), to the object itself ("") or
        to a subresource ("status")."""
        with self.lock:
            return [w for w in self.writes if w["kind"] == kind and w["key"] == key and
                    (subresource is None or (w["subresource"] or "") == subresource)]

    def conflict_next(self, kind, key, n=1):
        """The next n PUTs or PATCHes of kind/key (the object or its status) lose to another
        writer: the object gets a new resourceVersion first (a MODIFIED event, the content as it
        was), then the write is answered 409 Conflict. (A real server answers 409 only a write
        whose resourceVersion precondition the other write broke: a PATCH without one is retried
        inside the server; here every write is refused, the worst case a client must survive.)"""
        with self.lock:
            self.conflicts[(kind, key)] = n

    def kubeconfig(self, path, token="test-token", ca=None, client_cert=False, exec_plugin=None, server=None,
                   cert_files=None, tls_server_name=None):
        """A kubeconfig for this server: client_cert (True, or (cert, key) paths) inline as -data,
        cert_files (cert, key) as client-certificate / client-key file names."""
        user = {}
        if token:
            user["token"] = token
        if client_cert:
            crt, key = client_cert if isinstance(client_cert, tuple) else (f"{self.dir}/client.crt",
                                                                            f"{self.dir}/client.key")
            user["client-certificate-data"] = b64file(crt)
            user["client-key-data"] = b64file(key)
        if cert_files:
            user["client-certificate"], user["client-key"] = cert_files
        if exec_plugin:
            user["exec"] = exec_plugin
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "test",
               "clusters": [{"name": "test", "cluster": {
                   "server": server or self.url + self.prefix,
                   "certificate-authority-data": b64file(ca or f"{self.dir}/ca.crt"),
                   **({"tls-server-name": tls_server_name} if tls_server_name else {})}}],
               "users": [{"name": "u", "user": user}],
               "contexts": [{"name": "test", "context": {"cluster": "test", "user": "u"}}]}
        with open(path, "w") as f:
            json.dump(cfg, f)  # JSON is YAML
        return path

    def stop(self):
        self.drop_streams()
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- writes, as kube-apiserver makes them --------------------------------------------------
    def write(self, method, r, body, ctype):
        """One write to route r: (code, answer, key of the object or None, extra headers)."""
        kind, ns, name, sub = r or (None, None, None, None)
        meta = body.get("metadata") if isinstance(body, dict) and isinstance(body.get("metadata"), dict) else {}
        key = key_of(kind, ns, name or meta.get("name")) if kind and (name or meta.get("name")) else None
        if self.fail_writes:
            code = self.fail_writes
            out = status(code, REASONS.get(code, "InternalError"), f"the server answers every write {code}")
            if self.retry_after is None:
                return code, out, key, {}
            out["details"] = {"retryAfterSeconds": self.retry_after}
            return code, out, key, {"Retry-After": str(self.retry_after)}
        if r is None or kind in self.missing or sub not in (None, *RESOURCES[kind][2]):
            return 404, status(404, "NotFound", "the server could not find the requested resource"), key, {}
        if body is ValueError:
            return 400, status(400, "BadRequest", "the body is not JSON"), key, {}
        not_allowed = status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if method == "POST":
            if name is not None or (ns is None) != (kind in CLUSTER_SCOPED):
                return 405, not_allowed, key, {}
            return self.create(kind, ns, body) + ({},)
        if name is None or method == "DELETE" and sub:
            return 405, not_allowed, key, {}
        if method == "DELETE":
            return self.remove(kind, key, name, body) + (key, {})
        if method == "PATCH":
            if ctype not in MERGE_PATCHES:
                return 415, status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                   "accepted media types include: " + ", ".join(MERGE_PATCHES)), key, {}
            if not isinstance(body, dict):
                return 400, status(400, "BadRequest", "a merge patch is a JSON object"), key, {}
            if directives(body):
                return 415, status(415, "UnsupportedMediaType", "this server applies a strategic merge patch as a "
                                   "merge patch: its $ directives are not supported"), key, {}
            return self.update(kind, key, ns, name, sub, lambda old: merge_patch(old, body)) + (key, {})
        return self.update(kind, key, ns, name, sub, lambda old: body) + (key, {})

    def wrong_body(self, kind, body):
        _, k, api = KINDS[kind]
        if not isinstance(body, dict) or body.get("kind", k) != k or body.get("apiVersion", api) != api:
            return 400, status(400, "BadRequest", f"the body is not a {api} {k}")
        return None

    def create(self, kind, ns, body):
        """POST: (code, answer, key)."""
        _, k, api = KINDS[kind]
        if self.wrong_body(kind, body):
            return self.wrong_body(kind, body) + (None,)
        obj = dict(copy.deepcopy(body), kind=k, apiVersion=api)
        meta = obj["metadata"] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        if kind in CLUSTER_SCOPED:
            meta.pop("namespace", None)
        elif meta.setdefault("namespace", ns) != ns:
            return 400, status(400, "BadRequest", "the namespace of the provided object does not match the "
                               "namespace sent on the request"), None
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
        if not meta.get("name"):
            return 422, invalid(kind, "", "metadata.name", "Required value: name or generateName is required"), None
        key = key_of(kind, ns, meta["name"])
        if meta.get("resourceVersion"):
            return 500, status(500, "InternalError", "resourceVersion should not be set on objects to be created"), key
        store = self.store
        with store.cv:
            if key in store.objects[kind]:
                return 409, object_status(409, "AlreadyExists", kind, meta["name"],
                                          f'{qualified(kind)} "{meta["name"]}" already exists'), key
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
            refused = self.strategy(store, kind, key, obj, None, None)
            return (422, refused, key) if refused else (201, store.put(obj), key)

    def update(self, kind, key, ns, name, sub, make):
        """PUT and PATCH: make(stored object) is the object the client asks for. (code, answer)."""
        store = self.store
        with store.cv:
            old = store.objects[kind].get(key)
            if old is None:
                return 404, not_found(kind, name)
            with self.lock:
                lose = self.conflicts.get((kind, key), 0)
                if lose:
                    self.conflicts[(kind, key)] = lose - 1
            if lose:
                store.put(old)  # another writer's update: a new version, nothing else changed
                return 409, conflict(kind, name)
            new = make(old)
            if self.wrong_body(kind, new):
                return self.wrong_body(kind, new)
            meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
            if meta.get("name", name) != name:
                return 400, status(400, "BadRequest", f"the name of the object ({meta['name']}) does not match the "
                                   f"name on the URL ({name})")
            if ns and meta.get("namespace", ns) != ns:
                return 400, status(400, "BadRequest", "the namespace of the provided object does not match the "
                                   "namespace sent on the request")
            if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"].get("resourceVersion"):
                return 409, conflict(kind, name)
            new = dict(copy.deepcopy(new), kind=old["kind"], apiVersion=old["apiVersion"])
            meta = new["metadata"] = new["metadata"] if isinstance(new.get("metadata"), dict) else {}
            for f in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
                meta.pop(f, None)
                if f in old["metadata"]:
                    meta[f] = old["metadata"][f]
            refused = self.strategy(store, kind, key, new, old, sub)
            if refused:
                return 422, refused
            if new == old:
                return 200, copy.deepcopy(old)  # no change: no new version, no event
            return 200, store.put(new)

    def strategy(self, store, kind, key, obj, old, sub):
        """What the kind's strategy resets, defaults and allocates on a write (old None: a
        create); a 422 Status when it refuses the object."""
        name = obj["metadata"]["name"]
        if old is not None and "status" in RESOURCES[kind][2]:
            keep = "spec" if sub == "status" else "status"
            obj.pop(keep, None)
            if keep in old:
                obj[keep] = copy.deepcopy(old[keep])
        if kind == "namespaces":
            if old is None:
                fin = obj.setdefault("spec", {}).setdefault("finalizers", [])
                fin += [] if "kubernetes" in fin else ["kubernetes"]
                obj["status"] = {"phase": "Active"}
            else:
                obj.pop("spec", None)
                obj.update({"spec": copy.deepcopy(old["spec"])} if "spec" in old else {})
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        if kind == "services" and sub == "status":
            for i, ing in enumerate(((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []):
                try:
                    ipaddress.ip_address(ing.get("ip", "0.0.0.0"))
                except ValueError:
                    return invalid(kind, name, f"status.loadBalancer.ingress[{i}].ip",
                                   f'Invalid value: "{ing["ip"]}": must be a valid IP address')
        elif kind == "services":
            if old is None:
                obj["status"] = {"loadBalancer": {}}
            cidrs = list(SERVICE_CIDRS.values()) + [c for o in store.objects["servicecidrs"].values()
                                                    for c in (o.get("spec") or {}).get("cidrs") or []]
            refused = service_defaults(obj, [o for k, o in store.objects["services"].items() if k != key], cidrs, old)
            if refused:
                return invalid(kind, name, *refused)
        return None

    def remove(self, kind, key, name, options):
        """DELETE, with DeleteOptions' preconditions: (code, answer)."""
        store = self.store
        with store.cv:
            old = store.objects[kind].get(key)
            if old is None:
                return 404, not_found(kind, name)
            pre = (options.get("preconditions") if isinstance(options, dict) else None) or {}
            m = old["metadata"]
            for f, what in (("resourceVersion", "ResourceVersion"), ("uid", "UID")):
                if pre.get(f) and pre[f] != m.get(f):
                    return 409, object_status(409, "Conflict", kind, name, (
                        f'Operation cannot be fulfilled on {qualified(kind)} "{name}": the {what} in the precondition '
                        f"({pre[f]}) does not match the {what} in record ({m.get(f)}). The object might have been "
                        "modified"))
            if kind == "namespaces":  # what the namespace controller would delete first
                for k in set(KINDS) - CLUSTER_SCOPED:
                    for held in [h for h in store.objects[k] if h.startswith(name + "/")]:
                        store.delete(k, held)
            store.delete(kind, key)
        details = {"name": name, "kind": kind, "uid": m.get("uid", ""), **(
            {"group": group_of(kind)} if group_of(kind) else {})}
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    # --- discovery -----------------------------------------------------------------------------
    def discovery(self, path):
        """/version, /api, /apis and the APIResourceLists as kube-apiserver serves them, or None."""
        served = [k for k in KINDS if k not in self.missing]
        groups = {KINDS[k][2].split("/")[0]: KINDS[k][2] for k in served if "/" in KINDS[k][2]}
        group = {g: {"name": g, "versions": [{"groupVersion": gv, "version": "v1"}],
                     "preferredVersion": {"groupVersion": gv, "version": "v1"}} for g, gv in sorted(groups.items())}
        if path == "/version":
            return VERSION
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.split("//", 1)[1]}]}
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(group.values())}
        if path.startswith("/apis/") and path[6:] in group:
            return dict(group[path[6:]], kind="APIGroup", apiVersion="v1")
        gv = "v1" if path == "/api/v1" else path[6:] if path.startswith("/apis/") else None
        if gv not in ("v1", *groups.values()):
            return None
        resources = []
        for k in served:
            if KINDS[k][2] != gv:
                continue
            singular, short, subs = RESOURCES[k]
            r = {"name": k, "singularName": singular, "namespaced": k not in CLUSTER_SCOPED, "kind": KINDS[k][1],
                 "verbs": VERBS}
            if short:
                r["shortNames"] = short
            if k == "services":
                r["categories"] = ["all"]
            resources.append(r)
            resources += [{"name": f"{k}/{s}", "singularName": "", "namespaced": k not in CLUSTER_SCOPED,
                           "kind": KINDS[k][1], "verbs": ["get", "patch", "update"]} for s in subs]
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # --- serving -----------------------------------------------------------------------------
    def _start(self):
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                # As Go's servers do: an answer's headers and body, written apart, are not held
                # back 40 ms for the client's delayed ACK (Nagle).
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *a):
                pass

            def send_json(self, code, obj, headers=None, ctype="application/json"):
                body = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def authenticated(self):
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer ") and (auth[7:] in srv.tokens or
                                                   any(auth[7:].startswith(p) for p in srv.token_prefixes)):
                    return True
                cert = self.connection.getpeercert()
                if not auth and cert:
                    return True  # verified against the CA by the TLS layer
                self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
                return False

            def strip_prefix(self, path):
                if not srv.prefix:
                    return path
                return path[len(srv.prefix):] if path.startswith(srv.prefix + "/") else None

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                if not self.authenticated():
                    return
                path = self.strip_prefix(u.path)
                if path is None:
                    return self.send_json(404, status(404, "NotFound", f"the server could not find {u.path}"))
                u = u._replace(path=path)
                with srv.lock:
                    srv.requests.append(("GET", u.path, q, time.monotonic()))
                if path == "/openapi/v2":
                    if "protobuf" in self.headers.get("Accept", ""):
                        # (kube-openapi answers "...v2.v1.0+protobuf": the "@" asked for is no media type Go parses)
                        return self.send_json(200, OPENAPI_PB, ctype="application/com.github.proto-openapi.spec.v2"
                                              ".v1.0+protobuf")
                    return self.send_json(200, OPENAPI)
                doc = srv.discovery(path)
                if doc is not None:
                    return self.send_json(200, doc)
                r = route(path)
                if r is None or r[0] in srv.missing or r[3] not in (None, *RESOURCES[r[0]][2]):
                    return self.send_json(404, status(404, "NotFound", f"the server could not find {u.path}"))
                kind, ns, name, _ = r
                table = table_version(self.headers.get("Accept", ""))
                if name is None and q.get("watch") in ("1", "true"):
                    return self.watch(kind, q, ns, table)
                if name is None:
                    return self.list(kind, q, ns, table)
                obj = srv.get(kind, key_of(kind, ns, name))
                if obj is None:
                    return self.send_json(404, not_found(kind, name))
                self.send_json(200, as_table(kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                             q.get("includeObject"), table) if table else obj)

            def who(self):
                """The bearer token, or the client certificate's CN."""
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer "):
                    return auth[7:]
                cert = self.connection.getpeercert() or {}
                return dict(rdn[0] for rdn in cert.get("subject", ())).get("commonName")

            def write(self, method):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                if not self.authenticated():
                    return
                t = time.monotonic()
                path = self.strip_prefix(u.path)
                try:
                    body = json.loads(raw) if raw.strip() else None
                except ValueError:
                    body = ValueError
                r = route(path) if path is not None else None
                code, answer, key, headers = srv.write(method, r, body, self.headers.get(
                    "Content-Type", "").split(";")[0].strip())
                with srv.lock:
                    srv.requests.append((method, path or u.path, q, t))
                    srv.writes.append({"method": method, "path": path or u.path, "kind": r and r[0], "key": key,
                                       "subresource": r and r[3], "body": None if body is ValueError else body,
                                       "code": code, "who": self.who(), "time": t})
                self.send_json(code, answer, headers)

            def do_POST(self):
                self.write("POST")

            def do_PUT(self):
                self.write("PUT")

            def do_PATCH(self):
                self.write("PATCH")

            def do_DELETE(self):
                self.write("DELETE")

            def list(self, kind, q, ns=None, table=None):
                if kind in srv.hold:
                    srv.hold[kind].wait(120)
                store = srv.store
                limit = int(q.get("limit", "0") or 0)
                token = q.get("continue")
                if token:
                    if srv.expire_continues or token not in srv.continues:
                        return self.send_json(410, status(410, "Expired", "the continue token has expired"))
                    rv, items = srv.continues.pop(token)
                else:
                    with store.cv:
                        rv = store.rv
                        items = [copy.deepcopy(o) for _, o in sorted(store.objects[kind].items())
                                 if selector_matches(q.get("labelSelector"), o["metadata"].get("labels", {}))
                                 and fields_match(q.get("fieldSelector"), o)
                                 and ns in (None, o["metadata"].get("namespace"))]
                    for o in items:  # a typed list's items carry no kind
                        o.pop("kind", None)
                        o.pop("apiVersion", None)
                page, rest = (items[:limit], items[limit:]) if limit else (items, [])
                meta = {"resourceVersion": str(rv)}
                if rest:
                    t = base64.b64encode(os.urandom(12)).decode()
                    srv.continues[t] = (rv, rest)
                    meta["continue"] = t
                _, k, api = KINDS[kind]
                self.send_json(200, as_table(kind, page, meta, q.get("includeObject"), table) if table else
                               {"kind": k + "List", "apiVersion": api, "metadata": meta, "items": page})

            def chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def watch(self, kind, q, ns=None, table=None):
                store = srv.store
                fault = srv.watch_fault
                if isinstance(fault, int):
                    body = (json.dumps(status(fault, "InternalError", "the watch cannot be served")) + "\n").encode()
                    self.send_response(fault)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    if srv.retry_after is not None:
                        self.send_header("Retry-After", str(srv.retry_after))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if fault == "close":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.chunk(b"")
                    return
                rv_text = q.get("resourceVersion", "")
                try:
                    since = int(rv_text or 0)
                except ValueError:
                    since = -1
                timeout = float(q.get("timeoutSeconds", "300"))
                bookmarks = q.get("allowWatchBookmarks") == "true"
                sel, fsel = q.get("labelSelector"), q.get("fieldSelector")
                if since > store.rv:
                    # A version the server has not reached: a real one waits (3 s in the watch
                    # cache) and then answers 504 "Too large resource version", Retry-After 1.
                    with store.cv:
                        store.cv.wait_for(lambda: store.rv >= since, 3)
                    if since > store.rv:
                        body = (json.dumps(dict(status(504, "Timeout", f"Too large resource version: {since}, "
                                                       f"current: {store.rv}"), details={"causes": [
                                                           {"reason": "ResourceVersionTooLarge"}],
                                                           "retryAfterSeconds": 1})) + "\n").encode()
                        self.send_response(504)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.send_header("Retry-After", "1")
                        self.end_headers()
                        self.wfile.write(body)
                        return
                gone = since > 0 and since < store.oldest - 1 or since < 0
                if gone and srv.gone_as_status:
                    return self.send_json(410, status(410, "Expired", f"too old resource version: {since}"))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if gone:
                    self.chunk((json.dumps({"type": "ERROR", "object": status(
                        410, "Expired", f"too old resource version: {since} ({store.oldest})")}) + "\n").encode())
                    self.chunk(b"")
                    return
                first = True

                def event(typ, obj):
                    """An event line; asked as=Table (kubectl get -w), its object a Table of one row, the
                    column definitions in the first event alone."""
                    nonlocal first
                    if table:
                        obj = as_table(kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                       q.get("includeObject"), table)
                        obj["columnDefinitions"] = obj["columnDefinitions"] if first else []
                        first = False
                    return (json.dumps({"type": typ, "object": obj}) + "\n").encode()

                with srv.lock:
                    srv.streams += 1
                epoch = store.epoch
                raw_seen = len(srv.raw)
                end = time.monotonic() + timeout
                next_bookmark = time.monotonic() + srv.bookmark_seconds
                last = since
                if rv_text in ("", "0"):
                    # From "0" or "": the current state as synthetic ADDED events, then on from it.
                    with store.cv:
                        last = store.rv
                        current = [copy.deepcopy(o) for _, o in sorted(store.objects[kind].items())
                                   if selector_matches(sel, o["metadata"].get("labels", {})) and fields_match(fsel, o)
                                   and ns in (None, o["metadata"].get("namespace"))]
                    try:
                        for o in current:
                            self.chunk(event("ADDED", o))
                    except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                        with srv.lock:
                            srv.streams -= 1
                        return
                try:
                    while True:
                        with store.cv:
                            store.cv.wait(0.1)
                            if store.epoch != epoch or srv.store is not store:
                                return  # dropped: no final chunk
                            events = [e for e in store.history[bisect.bisect_right(store.rvs, last):]
                                      if e[1] == kind]
                            at = store.rv  # every event of this kind up to here is in events
                            raw = srv.raw[raw_seen:]
                            raw_seen = len(srv.raw)
                        if srv.stall:
                            end = time.monotonic() + timeout  # neither a byte nor an end
                            continue
                        for r_kind, data in raw:
                            if r_kind in (None, kind):
                                if isinstance(data, tuple):  # (bytes, "cut"): then the connection ends
                                    self.chunk(data[0])
                                    return
                                self.chunk(data)
                        for rv, _, typ, obj in events:
                            last = rv
                            if ns not in (None, obj["metadata"].get("namespace")):
                                continue
                            if typ != "DELETED" and not (selector_matches(sel, obj["metadata"].get("labels", {}))
                                                         and fields_match(fsel, obj)):
                                typ = "DELETED"  # left the selector: gone for this watch
                            self.chunk(event(typ, obj))
                        now = time.monotonic()
                        if bookmarks and now >= next_bookmark:
                            next_bookmark = now + srv.bookmark_seconds
                            _, k, api = KINDS[kind]
                            last = max(last, at)
                            self.chunk((json.dumps({"type": "BOOKMARK", "object": {
                                "kind": k, "apiVersion": api,
                                "metadata": {"resourceVersion": str(last)}}}) + "\n").encode())
                        if now >= end:
                            self.chunk(b"")
                            return
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                    return
                finally:
                    with srv.lock:
                        srv.streams -= 1
                    self.close_connection = True

        class TLSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        if ":" in self.host:
            TLSServer.address_family = socket.AF_INET6
        self.httpd = TLSServer((self.host, self.listen_port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f"{self.dir}/server.crt", f"{self.dir}/server.key")
        ctx.load_verify_locations(f"{self.dir}/ca.crt")
        ctx.verify_mode = ssl.CERT_OPTIONAL
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"https://[{self.host}]:{self.port}" if ":" in self.host else f"https://{self.host}:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def generated(n, namespace="bulk"):
    """n ClusterIP Services (10.97.x.y:80) with one EndpointSlice each (endpoint 10.245.x.y:8080)."""
    out = []
    for i in range(n):
        name = f"{namespace}-{i:05d}" if n > 9999 else f"{namespace}-{i:04d}"
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
                    "spec": {"type": "ClusterIP", "clusterIP": f"10.{97 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}",
                             "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
        out.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                    "metadata": {"name": name + "-abc", "namespace": namespace,
                                 "labels": {"kubernetes.io/service-name": name}},
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                    "endpoints": [{"addresses": [f"10.{245 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"],
                                   "conditions": {"ready": True}}]})
    return out


def load_objects(path):
    """The Services and EndpointSlices of a kubectl -o yaml file (a List or a stream)."""
    import yaml
    out = []
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if not doc:
                continue
            for o in doc.get("items", [doc]) if doc.get("kind", "").endswith("List") else [doc]:
                if o.get("kind") in ("Service", "EndpointSlice"):
                    out.append(o)
    return out


if __name__ == "__main__":
    # kube_apiserver.py DIR [OBJECTS.yaml] [--host ADDR] [--port PORT]
    args, opts = [], {}
    it = iter(sys.argv[1:])
    for a in it:
        if a in ("--host", "--port"):
            opts[a[2:]] = next(it)
        else:
            args.append(a)
    d = args[0]
    os.makedirs(d, exist_ok=True)
    s = Server(d, host=opts.get("host", "127.0.0.1"), port=int(opts.get("port", 0)))
    for o in load_objects(args[1]) if len(args) > 1 else []:
        s.put(o)
    s.kubeconfig(f"{d}/kubeconfig")
    print(f"serving {s.url}; kubeconfig {d}/kubeconfig", flush=True)
    threading.Event().wait()
