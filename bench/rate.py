#!/usr/bin/python3
"""Receive rate of a DPDK process's port, read through its telemetry socket (what
dpdk-telemetry.py reads): works the same for svcgate, dpdk-testpmd and ovs-vswitchd.

  rate.py --prefix P [--port 0] [--warmup S] [--seconds S]
      Waits until the port counts packets, then `warmup` seconds more, then samples ipackets
      over `seconds`; prints one JSON object {"mpps": ..., "packets": ..., "seconds": ...}.
"""
import argparse
import glob
import json
import socket
import sys
import time


def connect(prefix, deadline):
    while True:
        paths = glob.glob(f"/var/run/dpdk/{prefix}/dpdk_telemetry.v2")
        if paths:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(paths[0])
                s.recv(4096)  # the greeting
                return s
            except OSError:
                pass
        if time.monotonic() > deadline:
            sys.exit(f"rate.py: no telemetry socket for file prefix {prefix}")
        time.sleep(0.2)


def query(s, cmd):
    s.send(cmd.encode())
    return json.loads(s.recv(1 << 16).decode())


def ipackets(s, port):
    r = query(s, f"/ethdev/stats,{port}")
    return int(r["/ethdev/stats"]["ipackets"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ports", type=int, default=1, help="sum ports port..port+N-1")
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--timeout", type=float, default=120.0)
    a = p.parse_args()
    deadline = time.monotonic() + a.timeout
    s = connect(a.prefix, deadline)

    def total():
        return sum(ipackets(s, a.port + i) for i in range(a.ports))

    while True:
        try:
            if total() > 0:
                break
        except (KeyError, ValueError, TypeError, OSError):
            pass
        if time.monotonic() > deadline:
            sys.exit("rate.py: the port never received")
        time.sleep(0.2)
    time.sleep(a.warmup)
    t0, n0 = time.monotonic(), total()
    time.sleep(a.seconds)
    t1, n1 = time.monotonic(), total()
    print(json.dumps({"mpps": (n1 - n0) / (t1 - t0) / 1e6, "packets": n1 - n0, "seconds": t1 - t0}))


if __name__ == "__main__":
    main()
