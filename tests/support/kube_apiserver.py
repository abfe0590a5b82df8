"""A Kubernetes API server of the tests' own, for what svcgate's client relies on (control/kube/):
no kube-apiserver can be installed on Debian 12, so this one follows the API conventions as a
real one serves them, for Services (core/v1), EndpointSlices (discovery.k8s.io/v1), Nodes (core/v1)
and ServiceCIDRs (networking.k8s.io/v1; the last two cluster-scoped):

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
  - continue tokens expire with compaction (410 Expired);
  - served under a path prefix (prefix="/k8s/clusters/c-1"), on IPv6 (host="::1"); the server's
    certificate names 127.0.0.1, ::1 and kube.test in its subjectAltNames, not in its CN;
  - label selectors: key, !key, key=value, key!=value, comma-separated; field selectors on
    metadata.name and metadata.namespace (=, ==, !=);
  - a kind in `missing` is not served (404, as an older cluster without ServiceCIDRs);
  - every write bumps one resourceVersion counter and stamps the object.

GET and PUT of one object (/api/v1/namespaces/NS/services/NAME, /apis/discovery.k8s.io/v1/
namespaces/NS/endpointslices/NAME) let a shell script edit it, as `kubectl replace` would.

The tests drive it from Python: put/delete objects, compact the history, drop every stream,
restart with a new history, stall the watches (no byte, no end), send raw lines (garbage) into
them, hold a kind's LIST until released, count the requests (in a time window too), and make it
misbehave as broken servers and proxies do: every WATCH closed at once or answered with one code
(with a Retry-After), every continue token expired.

Run alone (python3 kube_apiserver.py DIR [OBJECTS.yaml]) it serves the objects and writes
DIR/kubeconfig, for a look with kubectl or svcgate."""
import base64
import bisect
import copy
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

KINDS = {
    "services": ("/api/v1/services", "Service", "v1"),
    "endpointslices": ("/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice", "discovery.k8s.io/v1"),
    "nodes": ("/api/v1/nodes", "Node", "v1"),
    "servicecidrs": ("/apis/networking.k8s.io/v1/servicecidrs", "ServiceCIDR", "networking.k8s.io/v1"),
}
CLUSTER_SCOPED = {"nodes", "servicecidrs"}


def kind_of(obj):
    for name, (_, kind, _) in KINDS.items():
        if obj.get("kind") == kind:
            return name
    raise ValueError(f"not a kind this server serves: {obj.get('kind')}")


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def sign(d, name, cn, ext, ca="ca"):
    """A key and a certificate `name` in d for `cn` with extensions `ext`, signed by CA `ca` of d."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{d}/{name}.key",
            "-out", f"{d}/{name}.csr")
    with open(f"{d}/{name}.ext", "w") as f:
        f.write(ext + "\n")
    openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/{ca}.crt", "-CAkey", f"{d}/{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")


def make_certs(d, san="IP:127.0.0.1,IP:::1,DNS:kube.test", cn="not-a-name"):
    """A CA, a server certificate and a client certificate (CN svcgate), in d. The server's name is
    its subjectAltNames (kube.test: a name only a proxy resolves); its CN is not a name a client
    should accept (Go ignores it)."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
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
    """A field selector on metadata.name / metadata.namespace, as the API server takes them."""
    meta = obj.get("metadata", {})
    fields = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
    for term in filter(None, (sel or "").split(",")):
        neg = "!=" in term
        k, v = term.split("!=" if neg else "=", 1)
        if (fields.get(k.rstrip("="), "") == v.lstrip("=")) == neg:
            return False
    return True


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


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
                 host="127.0.0.1", certs=None):
        self.dir = certs or d
        if not certs:
            make_certs(d)
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
        """Requests for kind so far (LIST pages, WATCHes, or both)."""
        path = KINDS[kind][0]
        return sum(1 for m, p, q, _ in self.requests
                   if p == path and (watch is None or (q.get("watch") in ("1", "true")) == watch))

    def count_since(self, kind, since, watch=None):
        """The same, for requests made at or after monotonic time `since`."""
        path = KINDS[kind][0]
        return sum(1 for m, p, q, t in self.requests
                   if t >= since and p == path and (watch is None or (q.get("watch") in ("1", "true")) == watch))

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

    # --- serving -----------------------------------------------------------------------------
    def _start(self):
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send_json(self, code, obj):
                body = (json.dumps(obj) + "\n").encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
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
                kind = next((k for k, v in KINDS.items() if v[0] == u.path and k not in srv.missing), None)
                if kind is None and self.object_path(u.path):
                    kind, key = self.object_path(u.path)
                    obj = srv.store.objects[kind].get(key)
                    return self.send_json(200, obj) if obj else self.send_json(
                        404, status(404, "NotFound", f"{KINDS[kind][1]} {key} not found"))
                if kind is None:
                    self.send_json(404, status(404, "NotFound", f"the server could not find {u.path}"))
                elif q.get("watch") in ("1", "true"):
                    self.watch(kind, q)
                else:
                    self.list(kind, q)

            def object_path(self, path):
                """(kind, namespace/name) of /api/v1/namespaces/NS/services/NAME and the like."""
                for kind, (base, _, _) in KINDS.items():
                    head, _, plural = base.rpartition("/")
                    prefix = head + "/namespaces/"
                    if path.startswith(prefix):
                        parts = path[len(prefix):].split("/")
                        if len(parts) == 3 and parts[1] == plural:
                            return kind, f"{parts[0]}/{parts[2]}"
                return None

            def do_PUT(self):
                """An update (kubectl replace's request): the object replaced, a MODIFIED event."""
                u = urllib.parse.urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                if not self.authenticated():
                    return
                u = u._replace(path=self.strip_prefix(u.path) or "")
                target = self.object_path(u.path)
                try:
                    obj = json.loads(body)
                except ValueError:
                    return self.send_json(400, status(400, "BadRequest", "the body is not JSON"))
                if not target or not isinstance(obj, dict) or KINDS[target[0]][1] != obj.get("kind") or \
                        f"{obj.get('metadata', {}).get('namespace', 'default')}/{obj.get('metadata', {}).get('name')}" \
                        != target[1]:
                    return self.send_json(400, status(400, "BadRequest", "the object does not match the path"))
                with srv.lock:
                    srv.requests.append(("PUT", u.path, {}, time.monotonic()))
                if target[1] not in srv.store.objects[target[0]]:
                    return self.send_json(404, status(404, "NotFound", f"{obj['kind']} {target[1]} not found"))
                self.send_json(200, srv.store.put(obj))

            def list(self, kind, q):
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
                                 and fields_match(q.get("fieldSelector"), o)]
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
                self.send_json(200, {"kind": k + "List", "apiVersion": api, "metadata": meta, "items": page})

            def chunk(self, data):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def watch(self, kind, q):
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
                                   if selector_matches(sel, o["metadata"].get("labels", {})) and fields_match(fsel, o)]
                    try:
                        for o in current:
                            self.chunk((json.dumps({"type": "ADDED", "object": o}) + "\n").encode())
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
                            if typ != "DELETED" and not (selector_matches(sel, obj["metadata"].get("labels", {}))
                                                         and fields_match(fsel, obj)):
                                typ = "DELETED"  # left the selector: gone for this watch
                            self.chunk((json.dumps({"type": typ, "object": obj}) + "\n").encode())
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
        self.httpd = TLSServer((self.host, 0), Handler)
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
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    s = Server(d)
    for o in load_objects(sys.argv[2]) if len(sys.argv) > 2 else []:
        s.put(o)
    s.kubeconfig(f"{d}/kubeconfig")
    print(f"serving {s.url}; kubeconfig {d}/kubeconfig", flush=True)
    threading.Event().wait()
