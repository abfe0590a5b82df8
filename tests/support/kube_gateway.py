"""A gateway following the tests' API server (kube_apiserver.py): a daemon on a net_null port (no
traffic: what is checked is what it publishes, through svcgatectl and /metrics), and the checks'
helpers the API tests share."""
import datetime
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import checks


def check(cond, what, detail=""):
    if not checks.check(cond, what) and detail:
        print("      " + str(detail).replace("\n", "\n      ")[:2000])
    return cond


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout=20, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def now_rfc3339():
    """RFC3339Nano, as the EndpointSlice controller writes last-change-trigger-time: with whole
    seconds, an edit in the gateway's first second would date from before its start (not counted)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Gateway:
    def __init__(self, svcgate, d, name, kubeconfig, extra_api="", cluster="", env=None, services=None,
                 api=" min_sync_period_ms: 200, watch_timeout_seconds: 3, list_page_size: 100", lb=None):
        self.d, self.name = d, name
        self.ctl_path = os.path.join(os.path.dirname(svcgate), "svcgatectl")
        self.sock = f"{d}/{name}.sock"
        self.metrics = free_port()
        self.cfg = f"{d}/{name}.yaml"
        with open(self.cfg, "w") as f:
            f.write(
                "dataplane:\n  eal: [--no-huge, --no-shconf, -m, '256', --no-pci, --no-telemetry]\n"
                "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
                "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
                f"control: {{socket: {self.sock}, watch: false, metrics: '127.0.0.1:{self.metrics}'}}\n"
                f"cluster: {{node_ips: [10.9.0.1]{cluster}}}\n"
                + (services if services is not None else
                   "services:\n  - {name: file/only, cluster_ip: 10.96.0.1, ports: [{port: 80}], endpoints: [10.9.0.2]}\n")
                + f"kubernetes:\n  api: {{kubeconfig: {kubeconfig},{api}{extra_api}}}\n".replace(",}", "}")
                + (f"  load_balancer: {lb}\n" if lb is not None else ""))
        self.svcgate, self.env = svcgate, env
        self.err = open(f"{d}/{name}.log", "w+")
        self.start()

    def start(self):
        self.p = subprocess.Popen([self.svcgate, "--config", self.cfg], stdout=subprocess.DEVNULL, stderr=self.err,
                                  env=dict(os.environ, **(self.env or {})))
        wait_for(lambda: self.p.poll() is not None or self.ctl("status") is not None, 60)

    def kill(self):
        """SIGKILL: nothing is released, the Lease included."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def ctl(self, *args):
        r = subprocess.run([self.ctl_path, "--socket", self.sock, *args, "--json"], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def text(self, *args):
        """svcgatectl's table output."""
        r = subprocess.run([self.ctl_path, "--socket", self.sock, *args], capture_output=True, text=True, timeout=20)
        return r.stdout if r.returncode == 0 else ""

    def api(self):
        s = self.ctl("status")
        return (s or {}).get("kubernetes", {}).get("api") or {}

    def services(self):
        """{namespace/name: set of endpoint IPs} as published (`svcgatectl services`, `endpoints`)."""
        out = {}
        for sp in self.ctl("services") or []:
            out.setdefault(sp["name"].split(":")[0], set())
        for e in self.ctl("endpoints") or []:
            out.setdefault(e["service"].split(":")[0], set()).add(e["endpoint"].rsplit(":", 1)[0].strip("[]"))
        return out

    def healthz(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/healthz", timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except OSError as e:
            return None, str(e)

    def metric(self, name):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return None

    def log(self):
        self.err.seek(0)
        return self.err.read()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


