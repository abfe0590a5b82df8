#!/usr/bin/python3
"""svcgate under systemd's notify protocol, with a socket of our own as NOTIFY_SOCKET: READY=1 once
the ports are up and the first config is published, RELOADING=1 then READY=1 around a reload,
STATUS= lines, WATCHDOG=1 while the workers make progress and none once they are stuck (the
SVCGATE_TEST_STALL_AFTER hook stops their progress)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate = sys.argv[1]
ctl = os.path.join(os.path.dirname(svcgate), "svcgatectl")
STALL_AFTER = 6  # seconds after READY=1


def drain(sock, until, done=lambda got: False):
    """Every notify message until `until` (monotonic), each as (time, set of lines); sooner once
    done(the messages so far) holds, asked at least every 0.1 s."""
    got = []
    while (left := until - time.monotonic()) > 0 and not done(got):
        sock.settimeout(min(left, 0.1))
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        got.append((time.monotonic(), set(data.decode().splitlines())))
    return got


def reload_sequence(got):
    return [x for _, l in got for x in sorted(l) if x in ("RELOADING=1", "READY=1")]


with tempfile.TemporaryDirectory() as d:
    cfg = os.path.join(d, "gw.yaml")
    with open(cfg, "w") as f:
        f.write("dataplane:\n  eal: [--no-huge, --no-shconf, -m, '256', --no-pci, --no-telemetry]\n"
                "  mbufs: 4096\n  flow_table: {capacity: 4096, capacity_v6: 1024}\n"
                "  ports: [{name: a, device: 'net_null0,no-rx=1', addresses: [10.9.0.1/24]}]\n"
                f"control: {{socket: {d}/s.sock, metrics: '', watch: false}}\n"
                "services:\n  - {name: a/b, cluster_ip: 10.96.0.1, ports: [{port: 80}], endpoints: [10.9.0.2]}\n")
    path = os.path.join(d, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="400000", SVCGATE_TEST_STALL_AFTER=str(STALL_AFTER))
    env.pop("WATCHDOG_PID", None)
    err = open(os.path.join(d, "stderr"), "w+")
    start = time.monotonic()
    p = subprocess.Popen([svcgate, "--config", cfg], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        ready_at = None
        msgs = []
        while ready_at is None and time.monotonic() < start + 60 and p.poll() is None:
            # Up to READY=1: the keepalives after it are counted below, from it on.
            for t, lines in drain(sock, time.monotonic() + 1, lambda got: any("READY=1" in l for _, l in got)):
                msgs.append((t, lines))
                if "READY=1" in lines and ready_at is None:
                    ready_at = t
                    # At READY the ports are up and the config published: the control socket says so.
                    st = subprocess.run([ctl, "--socket", f"{d}/s.sock", "status"], capture_output=True, text=True, timeout=10)
        check(ready_at is not None, f"READY=1 arrives ({[sorted(l) for _, l in msgs][:3]})")
        if ready_at is None:
            raise SystemExit
        check(st.returncode == 0 and "generation 1" in st.stdout and "link up" in st.stdout,
              f"at READY the first config is published and the port is up ({st.stdout.strip()[:120]})")
        ready_lines = next(l for t, l in msgs if t == ready_at)
        check(any(x.startswith("STATUS=generation 1,") for x in ready_lines), f"READY comes with a STATUS line ({sorted(ready_lines)})")
        # The watchdog: WATCHDOG_USEC 400 ms, a keepalive every 200 ms while the workers run.
        got = drain(sock, ready_at + 2)
        n = sum("WATCHDOG=1" in l for _, l in got)
        check(n >= 5, f"WATCHDOG=1 while the workers make progress ({n} in the first 2 s)")
        # A reload: RELOADING=1, then READY=1 with the new generation (the reload is done before
        # the stall begins: both are the control loop's).
        p.send_signal(signal.SIGHUP)
        got = drain(sock, time.monotonic() + 30, lambda got: len(reload_sequence(got)) >= 2)
        seq = reload_sequence(got)
        check(seq[:2] == ["RELOADING=1", "READY=1"], f"SIGHUP: RELOADING=1 then READY=1 ({seq})")
        check(any(x.startswith("STATUS=generation 2,") for _, l in got for x in l), "after the reload the STATUS says generation 2")
        # The stall: STALL_AFTER s after READY=1 by the daemon's clock, which it logs; from then
        # on no keepalive (one may still be under way for a second).
        def stall_logged(_=None):
            with open(err.name) as f:
                return "test hook: the workers stall" in f.read()
        drain(sock, time.monotonic() + 60, stall_logged)
        stalled = stall_logged()
        drain(sock, time.monotonic() + 1.0)
        got = drain(sock, time.monotonic() + 2.0)
        n = sum("WATCHDOG=1" in l for _, l in got)
        check(stalled and n == 0, f"no WATCHDOG=1 once the workers are stuck ({n} in 2 s"
                                  f"{'' if stalled else '; the stall was never logged'})")
        err.flush()
        err.seek(0)
        log = err.read()
        check("the systemd watchdog is not fed" in log, "the stuck workers are logged")
    finally:
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = None
    check(rc == 0, f"svcgate stops on SIGINT with its workers stuck (exit {rc})")
checks.finish("svcgate and systemd's notify protocol")
