#!/usr/bin/python3
"""A lone gateway restarted under load keeps its connections (issue 19, item 4): svcgate in the
single-gateway lab with dataplane.flow_table.state_file, keep-alive connections of three kinds
(masqueraded NodePort from the client, IPv6 from the client to a ClusterIP, a pod to a ClusterIP
unmasqueraded) each asking every 100 ms, and a 100 MB download at 12 MB/s; svcgate is stopped with
SIGTERM in the middle of it and started again. Every connection must go on and the download arrive
intact. Then the same restart without the state file, as a control: connections do break, so the
check above is one that can fail. Last, a state file changed on disk is refused with its reason
and the gateway serves all the same.

usage: restart_e2e.py SVCGATE SOURCE_DIR
Prints "ok   ..." / "FAIL ..." per check; exits 1 on a failure.
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import checks  # noqa: E402
from checks import check  # noqa: E402

svcgate, src = sys.argv[1], sys.argv[2]
RUN = "/run/svcgate-lab"
SIZE = 100_000_000


def lab(script):
    return checks.lab(src, script)


def wait(cond, seconds):
    t = checks.wait(cond, seconds)
    return None if t is None else round(t, 2)


def gateway_pid():
    with open(f"{RUN}/svcgate.pid") as f:
        return int(f.read())


def log_text():
    try:
        with open(f"{RUN}/svcgate.log") as f:
            return f.read()
    except OSError:
        return ""


def exited(pid):
    """Gone, or a zombie with no thread left. A zombie main thread is not enough: the process's
    other threads may still be exiting, holding its files (the DPDK runtime files' locks, which
    the next start then finds taken: "Cannot allocate memzone list")."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split()[2] != "Z":
                return False
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def stop_gateway():
    """SIGTERM; waits for the exit. Returns (seconds it took, its log)."""
    pid = gateway_pid()
    os.kill(pid, signal.SIGTERM)
    gone = wait(lambda: exited(pid), 20)
    return (gone if gone is not None else -1), log_text()


def start_gateway(cfg_path):
    t0 = time.monotonic()
    r = lab(f"lab_start_gateway {svcgate} {cfg_path}")
    return r.returncode == 0, round(time.monotonic() - t0, 2)


def connections():
    """The three kinds: 4 masqueraded NodePort ones, 2 IPv6 client -> ClusterIP, 4 pod -> ClusterIP."""
    ka = [checks.KeepAlive(src, "client", "192.168.67.8", 4, 30001), checks.KeepAlive(src, "client", "fd00:96::79", 2),
          checks.KeepAlive(src, "lab-sleeper", "10.107.169.79", 4)]
    ok = wait(lambda: all(k.ready() for k in ka), 30)
    return ka, ok


def summary(results):
    conns = [c for r in results for c in r]
    broke = [c for c in conns if c["errors"]]
    gap = max((c["gap"] for c in conns), default=0)
    return conns, broke, gap


def main():
    if os.geteuid() != 0:
        check(False, "the end-to-end test needs root (network namespaces)")
        return
    tmp = tempfile.mkdtemp(prefix="svcgate-restart-")
    state_file = os.path.join(tmp, "flows.state")
    with open(os.path.join(src, "config", "lab.yaml")) as f:
        cfg = yaml.safe_load(f)
    cfg["dataplane"]["flow_table"]["state_file"] = state_file
    cfg_path = os.path.join(tmp, "lab.yaml")
    with open(cfg_path, "w") as f:
        yaml.safe_dump(cfg, f)
    try:
        r = lab(f"lab_up && lab_start_apps && lab_start_gateway {svcgate} {cfg_path}")
        if not check(r.returncode == 0, f"lab up, svcgate running with a state file ({(r.stderr or '').strip()[-300:]})"):
            return
        check("flow state " + state_file + ": none, starting with an empty flow table" in log_text(),
              "the first start finds no state file and says so")

        # 1. Restart during a 100 MB download and 10 keep-alive connections.
        ka, ok = connections()
        check(ok is not None, f"10 keep-alive connections of three kinds answering (after {ok} s)")
        out = os.path.join(tmp, "blob")
        curl = subprocess.Popen(["ip", "netns", "exec", "client", "curl", "-s", "-m", "120", "--limit-rate", "12M",
                                 "-D", out + ".head", "-o", out, f"http://192.168.67.8:30001/blob/{SIZE}"])
        started = wait(lambda: os.path.exists(out) and os.path.getsize(out) > 10_000_000, 30)
        before = os.path.getsize(out) if os.path.exists(out) else 0
        check(started is not None and before < SIZE, f"download under way: {before:,} of {SIZE:,} bytes when stopped")
        took, stop_log = stop_gateway()
        m = re.search(r"flow state \S+: wrote (\d+) flows in (\d+) ms", stop_log)
        written = int(m.group(1)) if m else 0
        check(m is not None and written >= 11, f"SIGTERM: svcgate wrote its flows ({m.group(0) if m else stop_log[-400:]}), "
              f"exited in {took} s")
        ok, boot = start_gateway(cfg_path)
        start_log = log_text()
        m = re.search(r"flow state \S+: restored (\d+) of (\d+) flows written (\d+) s ago in (\d+) ms", start_log)
        check(ok and m is not None and int(m.group(1)) == written == int(m.group(2)),
              f"started again in {boot} s: {m.group(0) if m else start_log[-600:]}")
        check(not os.path.exists(state_file), "the state file is gone once read (good for one start)")
        try:
            curl.wait(timeout=120)
        except subprocess.TimeoutExpired:
            curl.kill()
        head = open(out + ".head", "rb").read() if os.path.exists(out + ".head") else b""
        want = re.search(rb"x-sha256:\s*(\w+)", head, re.I)
        h = hashlib.sha256()
        with open(out, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        got = os.path.getsize(out)
        check(curl.returncode == 0 and got == SIZE and want and h.hexdigest() == want.group(1).decode(),
              f"the 100 MB download across the restart arrives intact (curl exit {curl.returncode}, {got:,} bytes, "
              f"sha256 {'matches' if want and h.hexdigest() == want.group(1).decode() else 'differs'})")
        time.sleep(2)
        conns, broke, gap = summary([k.stop() for k in ka])
        check(len(conns) == 10 and not broke,
              f"none of the {len(conns)} keep-alive connections broke across the restart (longest gap in answers "
              f"{gap} s){'; broke: ' + str([c['errors'][:1] for c in broke]) if broke else ''}")
        os.remove(out)

        # 2. The control: the same restart without the state file breaks connections.
        ka, ok = connections()
        check(ok is not None, "control: 10 keep-alive connections answering again")
        stop_gateway()
        os.remove(state_file)
        ok, boot = start_gateway(cfg_path)
        # A connection breaks on its next request (reset) or after the client's 5 s timeout.
        wait(lambda: any(c["errors"] for k in ka for c in k.read()), 30)
        conns, broke, gap = summary([k.stop() for k in ka])
        check(ok and len(broke) > 0,
              f"control: restarted without its state file, {len(broke)} of {len(conns)} connections broke "
              f"(so the check above can fail)")

        # 3. A state file changed on disk: refused with the reason, and the gateway serves.
        stop_gateway()
        with open(state_file, "r+b") as f:
            f.seek(40)
            b = f.read(1)
            f.seek(40)
            f.write(bytes([b[0] ^ 0xff]))
        ok, _ = start_gateway(cfg_path)
        text = log_text()
        check(ok and "refused, starting without it: checksum mismatch" in text,
              "a changed state file: refused with its reason ("
              + (re.search(r"flow state .*refused.*", text).group(0) if "refused" in text else text[-300:]) + ")")
        answer = checks.curl("client", "http://192.168.67.8:30001/") or ""
        check(answer.startswith("test-pod-"), "and the gateway serves all the same")
        check(os.path.exists(state_file), "the refused file is left for the operator")
    finally:
        r = lab("lab_stop_gateway; lab_down")
        if checks.failures:
            print("svcgate's log:\n" + log_text()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)


main()
checks.finish("restart with a state file")
