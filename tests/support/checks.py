"""Shared by the Python tests: one "ok   ..." or "FAIL ..." line per check (tools/test counts
them), the failure count, and the lab helpers of the end-to-end tests."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1
    return cond


def finish(title=None):
    if title:
        print(f"{'passed' if failures == 0 else 'failed'}: {title}")
    sys.exit(1 if failures else 0)


def lab(src, script):
    """Runs bash with tools/lib/lab.sh sourced."""
    return subprocess.run(["bash", "-c", f"source {src}/tools/lib/lab.sh; {script}"], capture_output=True,
                          text=True, timeout=120)


def lab_end(src, *remove):
    """A lab test's end: the gateway stopped and the lab down (its hugepage files gone, checked),
    the gateway's log printed when a check failed, the test's own files (`remove`) deleted."""
    r = lab(src, "lab_stop_gateway; cat $LAB_RUN/svcgate.log; lab_down")
    check(not glob.glob("/dev/hugepages/svcgate-labmap_*"), "lab_down removes the gateway's hugepage files")
    if failures:
        print("svcgate's log:\n" + r.stdout[-3000:])
    for path in remove:
        os.unlink(path)


def ns(name, *cmd, timeout=60):
    """A command inside a network namespace; bytes out. One still running after `timeout` raises
    subprocess.TimeoutExpired, after printing where it waits (stalled()) to stderr."""
    p = subprocess.Popen(["ip", "netns", "exec", name, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"still running after {timeout} s: ip netns exec {name} {' '.join(cmd)}\n{stalled(p.pid)}",
              file=sys.stderr, flush=True)
        p.kill()
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def netns_pid(name):
    """A process living in network namespace `name`: its /proc/PID/net shows that namespace."""
    want = os.stat(f"/run/netns/{name}")
    for link in glob.glob("/proc/[0-9]*/ns/net"):
        try:
            st = os.stat(link)
        except OSError:  # ended meanwhile
            continue
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            return int(link.split("/")[2])
    raise LookupError(f"no process in network namespace {name}")


def stalled(pid):
    """Where a process that should have ended waits, for the log of a failed run: its state, wait
    channel and kernel stack, its children's, the host's load and pressure, the kernel's last
    messages."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError as e:
            return f"({e.strerror})"

    lines, todo = [], [pid]
    while todo and len(lines) < 200:
        p = todo.pop(0)
        stat = read(f"/proc/{p}/stat")
        lines.append(f"pid {p} {read(f'/proc/{p}/cmdline').replace(chr(0), ' ')}: stat {stat[:60]}, "
                     f"wchan {read(f'/proc/{p}/wchan')}")
        lines += ["    " + l for l in read(f"/proc/{p}/stack").splitlines()]
        for t in glob.glob(f"/proc/{p}/task/*/children"):
            todo += [int(c) for c in read(t).split() if c.isdigit()]
    lines.append(f"loadavg {read('/proc/loadavg')}")
    for r in ("cpu", "memory", "io"):
        lines.append(f"pressure {r}: {read(f'/proc/pressure/{r}')}".replace("\n", "; "))
    try:
        lines += subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout.splitlines()[-15:]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "\n".join(lines)


def curl(name, *args, timeout=30):
    """curl inside a namespace: the body, or None when it failed."""
    r = ns(name, "curl", "-s", "-m", "10", *args, timeout=timeout)
    return r.stdout.decode(errors="replace") if r.returncode == 0 else None


def gateway_stats(ctl_bin, sock):
    """svcgatectl stats --json as a dict ({} when it fails)."""
    import json
    r = subprocess.run([ctl_bin, "--socket", sock, "stats", "--json"], capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else {}


# kBurst (dataplane/base/types.h): the most one transmit call hands a queue.
BURST = 32


def driver_held(ctl_bin, sock):
    """How many mbufs the ports' drivers may keep after the traffic: an AF_XDP queue holds the
    mbufs of its last transmit until the next one reaps its completion ring (at most a burst);
    the other drivers the tests use free them at once."""
    r = subprocess.run([ctl_bin, "--socket", sock, "status", "--json"], capture_output=True, text=True, timeout=30)
    ports = json.loads(r.stdout).get("ports", []) if r.returncode == 0 else []
    return sum(BURST * p.get("tx_queues", 1) for p in ports if p.get("device", "").startswith("net_af_xdp"))


def accounting(ctl_bin, sock, what, baseline=None):
    """Waits (bounded) until the gateway is idle, then checks that every worker's packets add up
    exactly (rx + generated = tx + dropped + held: a reject is transmitted, not a drop) and, given
    the in-use count of the mbuf pool taken before the traffic, that no mbuf leaked (beyond what
    the drivers hold until their next transmit, driver_held). Returns the in-use count."""
    import time
    prev, st = None, {}
    for _ in range(50):
        st = gateway_stats(ctl_bin, sock)
        ws = st.get("workers", [])
        now = [(w.get("rx"), w.get("tx"), w.get("held")) for w in ws]
        if ws and now == prev and all(w.get("held") == 0 for w in ws):
            break
        prev = now
        time.sleep(0.2)
    ws = st.get("workers", [])
    # The fragment hold is shared by the workers: each counts what it stored there and took out.
    balanced = [w.get("rx", -1) + w.get("generated", -1) + w.get("frag_taken", 0) ==
                w.get("tx", 0) + w.get("dropped", 0) + w.get("held", 0) + w.get("frag_stored", 0) for w in ws]
    check(bool(ws) and all(balanced) and all(w.get("unaccounted") == 0 for w in ws),
          f"{what}: every packet accounted for per worker (rx+generated+frag_taken = tx+dropped+held+frag_stored): {ws}")
    in_use = st.get("mempool", {}).get("in_use")
    if baseline is not None:
        slack = driver_held(ctl_bin, sock)
        check(in_use is not None and baseline <= in_use <= baseline + slack,
              f"{what}: mbufs in use back to {baseline} ({in_use}; the drivers may hold {slack} until they send again)")
    return in_use


# A keep-alive HTTP client for `python3 -c KEEPALIVE HOST PORT STOP_FILE LEAST`: one TCP connection,
# a request every 20 ms until STOP_FILE exists and more than LEAST were answered (at most 120 s), so
# that it spans whatever a test does meanwhile, however long a busy host takes. Prints the first
# pod at once, then a JSON summary.
KEEPALIVE = r"""
import http.client, json, os, sys, time
host, port, stop, least = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection(host, port, timeout=2)
pods, errors, gaps, last = [], [], [], None
end = time.monotonic() + 120
while time.monotonic() < end and not (os.path.exists(stop) and len(pods) > least):
    try:
        c.request("GET", "/")
        pods.append(c.getresponse().read().decode().strip())
    except Exception as e:
        errors.append(repr(e))
        break
    now = time.monotonic()
    if last is not None:
        gaps.append(now - last)
    last = now
    if len(pods) == 1:
        print(pods[0], flush=True)
    time.sleep(0.02)
print(json.dumps({"requests": len(pods), "pods": sorted(set(pods)), "errors": errors,
                  "max_gap": max(gaps) if gaps else None}), flush=True)
"""


# The lab's pods behind default/test-svc (tools/lib/lab.sh LAB_PODS): name -> address.
TEST_PODS = {"test-pod-1": "10.244.2.4", "test-pod-2": "10.244.2.6", "test-pod-3": "10.244.3.6"}


def log_count(src, marker):
    """How often the lab's svcgate logged `marker` so far."""
    return lab(src, "cat $LAB_RUN/svcgate.log").stdout.count(marker)


def publish(src, cfg, path, marker="reloaded"):
    """Writes cfg (a dict, or raw text) to `path` and sends the lab's svcgate SIGHUP; True when it
    logged `marker` within 5 s."""
    import time
    import yaml
    before = log_count(src, marker)
    with open(path, "w") as f:
        f.write(cfg if isinstance(cfg, str) else yaml.safe_dump(cfg))
    lab(src, "kill -HUP $(cat $LAB_RUN/svcgate.pid)")
    for _ in range(100):
        if log_count(src, marker) > before:
            return True
        time.sleep(0.05)
    return False


def wait(cond, limit, step=0.05):
    """Seconds until cond() held, or None after `limit` seconds."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if cond():
            return time.monotonic() - t0
        time.sleep(step)
    return None


class Client:
    """A traffic client of tests/e2e (keepalive.py, downloads.py) in namespace `ns_name`: it writes
    its records to a JSON state file and ends once a stop file exists. `argv` names the two files
    "{state}" and "{stop}". Its files live in a directory of its own, removed by stop()."""

    def __init__(self, src, ns_name, script, argv, stop_limit=20):
        self.dir = tempfile.mkdtemp(prefix="svcgate-client-")
        self.state, self.stop_file = f"{self.dir}/state", f"{self.dir}/stop"
        self.stop_limit = stop_limit
        args = [{"{state}": self.state, "{stop}": self.stop_file}.get(a, a) for a in argv]
        self.p = subprocess.Popen(["ip", "netns", "exec", ns_name, "/usr/bin/python3",
                                   os.path.join(src, "tests/e2e", script), *args])

    def read(self):
        """Its records, as last written."""
        try:
            with open(self.state) as f:
                return json.load(f)
        except (OSError, ValueError):
            return []

    def stop(self):
        """Ends it (within stop_limit seconds, else killed); its final records."""
        open(self.stop_file, "w").close()
        try:
            self.p.wait(timeout=self.stop_limit)
        except subprocess.TimeoutExpired:
            self.p.kill()
        res = self.read()
        shutil.rmtree(self.dir, ignore_errors=True)
        return res


class KeepAlive(Client):
    """tests/e2e/keepalive.py: n HTTP/1.1 connections to addr:port, each asking every 100 ms until
    stop(); one record per connection: port, ok, errors, gap, open."""

    def __init__(self, src, ns_name, addr, n, port=80):
        self.n = n
        super().__init__(src, ns_name, "keepalive.py", [addr, str(n), "{state}", "{stop}", str(port)])

    def ready(self):
        """Every connection has had answers."""
        return len([c for c in self.read() if c["ok"] > 2]) == self.n

    def wait_ready(self, limit=20):
        return wait(self.ready, limit)


class HaLab:
    """The HA lab of tools/lib/ha.sh for the end-to-end tests: its scripts (sync: flow
    replication on or off, HA_SYNC), each gateway's svcgatectl, the router's next hops."""
    RUN = "/run/svcgate-lab"
    N = 3
    LB4, LB6, LOCAL4 = "192.168.100.10", "fd00:100::10", "192.168.100.11"
    PRESERVE4, PRESERVE6 = "192.168.100.12", "fd00:100::12"  # default/preserve-lb: client_ip preserve
    EXT4 = {i: f"192.168.67.{7 + i}" for i in range(1, N + 1)}
    EXT6 = {i: f"fd00:67::{7 + i:x}" for i in range(1, N + 1)}

    def __init__(self, src, ctl, sync, kube=False):
        self.src, self.ctl, self.sync, self.kube = src, ctl, sync, kube

    def sh(self, script, timeout=120):
        """bash with lab.sh and ha.sh sourced."""
        return subprocess.run(["bash", "-c", f"export HA_SYNC={1 if self.sync else 0} HA_KUBE={1 if self.kube else 0}; "
                                             f"source {self.src}/tools/lib/lab.sh; "
                                             f"source {self.src}/tools/lib/ha.sh; {script}"],
                              capture_output=True, text=True, timeout=timeout)

    def gwctl(self, i, *args):
        r = subprocess.run([self.ctl, "--socket", f"{self.RUN}/gw{i}.sock", *args], capture_output=True, text=True,
                           timeout=30)
        return r.stdout

    def gwjson(self, i, *args):
        try:
            return json.loads(self.gwctl(i, *args, "--json"))
        except ValueError:
            return {}

    def hops(self, dst):
        """The router's next hops towards dst."""
        out = ns("router", "ip", "-6" if ":" in dst else "-4", "route", "show", dst).stdout.decode()
        return {w[w.index("via") + 1] for w in (line.split() for line in out.splitlines()) if "via" in w}
