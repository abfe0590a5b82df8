#!/usr/bin/python3
"""control.metrics and ha.listen in each address form: `svcgate --check` and the running daemon
agree (a value the check takes starts the daemon and is served there; one it refuses stops the
daemon with the same message), and /metrics answers over IPv6 at "[::1]:PORT" as over IPv4.
Loopback only; free ports picked by the kernel.

usage: metrics_listen_test.py SVCGATE"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402


def check(cond, what, detail=""):
    if not checks.check(cond, what) and detail:
        print("      " + detail.replace("\n", "\n      "))

svcgate = sys.argv[1]
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
BASE = ("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '256', --no-pci, --no-telemetry]\n"
        "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
        "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
        "services:\n  - {name: a/b, cluster_ip: 10.96.0.1, ports: [{port: 80}], endpoints: [10.9.0.2]}\n")


def free_port(family, kind=socket.SOCK_STREAM):
    with socket.socket(family, kind) as s:
        s.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        return s.getsockname()[1]


def run(d, name, control, extra=""):
    """(check's exit code and output, daemon's: 'running' or its exit code, stderr) for a config."""
    cfg = os.path.join(d, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(BASE + f"control: {{socket: {d}/{name}.sock, watch: false, {control}}}\n" + extra)
    c = subprocess.run([svcgate, "--config", cfg, "--check"], capture_output=True, text=True, timeout=60)
    err = open(os.path.join(d, name + ".err"), "w+")
    p = subprocess.Popen([svcgate, "--config", cfg], stdout=subprocess.DEVNULL, stderr=err)
    state = None
    deadline = time.monotonic() + 60
    while state is None and time.monotonic() < deadline:
        if p.poll() is not None:
            state = p.returncode
            break
        s = subprocess.run([ctl, "--socket", f"{d}/{name}.sock", "status"], capture_output=True, text=True, timeout=10)
        if s.returncode == 0:
            state = "running"
        else:
            time.sleep(0.2)
    return c, state, p, err


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def scrape(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except OSError as e:
        return None, str(e)


with tempfile.TemporaryDirectory() as d:
    # Taken by both: served where it says, in either family.
    for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "[::1]")):
        port = free_port(fam)
        c, state, p, err = run(d, f"ok{fam}", f"metrics: '{host}:{port}'")
        try:
            check(c.returncode == 0, f"--check takes control.metrics {host}:{port}", c.stderr.strip())
            check(state == "running", f"the daemon starts with control.metrics {host}:{port}", f"state {state}")
            code, body = scrape(f"http://{host}:{port}/metrics")
            check(code == 200 and "svcgate_service_packets_total" in body, f"/metrics answers at {host}:{port}",
                  f"{code}: {body[:200]}")
            err.seek(0)
            log = err.read()
            check(f"http://{host}:{port}/metrics" in log, f"the daemon's log names http://{host}:{port}/metrics",
                  log[-400:])
        finally:
            stop(p)
    # Refused by both, with the same words.
    for bad in ("::1:9477", "127.0.0.1", "[::1]", "localhost:9477", "127.0.0.1:0", "[::1]:70000"):
        c, state, p, err = run(d, "bad", f"metrics: '{bad}'")
        stop(p)
        err.seek(0)
        log = err.read()
        want = f'"{bad}" is not IPv4:PORT, [IPv6]:PORT or off'
        check(c.returncode != 0 and want in c.stderr, f"--check refuses control.metrics {bad}", c.stderr.strip())
        check(state not in ("running", 0, None) and want in log, f"the daemon refuses control.metrics {bad}",
              f"state {state}: {log[-300:]}")
    # ha.listen and ha.peers in the IPv6 form: the replication socket is bound where it says.
    key = os.path.join(d, "ha.key")
    with open(key, "w") as f:
        f.write("ab" * 32 + "\n")
    os.chmod(key, 0o600)
    port, peer = free_port(socket.AF_INET6, socket.SOCK_DGRAM), free_port(socket.AF_INET6, socket.SOCK_DGRAM)
    ha = f"ha:\n  listen: '[::1]:{port}'\n  peers: ['[::1]:{peer}']\n  key_file: {key}\n  takeover_ports: [a]\n"
    c, state, p, err = run(d, "ha6", "metrics: off", ha)
    try:
        check(c.returncode == 0, "--check takes ha.listen [::1]:PORT", c.stderr.strip())
        check(state == "running", "the daemon starts with ha.listen [::1]:PORT", f"state {state}")
        ss = subprocess.run(["ss", "-Hulnp"], capture_output=True, text=True).stdout
        check(any(f"[::1]:{port}" in line and f"pid={p.pid}," in line for line in ss.splitlines()),
              f"the daemon's replication socket is bound on [::1]:{port}", ss)
    finally:
        stop(p)
checks.finish("control.metrics and ha.listen: --check and the daemon agree")
