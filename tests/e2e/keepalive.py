#!/usr/bin/python3
"""Keep-alive HTTP connections for the HA test, run inside the client's namespace.

usage: keepalive.py ADDRESS N STATE_FILE STOP_FILE [PORT]
Opens N HTTP/1.1 connections to ADDRESS:PORT (80) and sends a request on each every 100 ms until
STOP_FILE exists, then closes them. STATE_FILE is rewritten every 0.5 s and at the end with one
record per connection: its local port, requests answered, errors (an exception, a reset, a wrong
answer: the connection is then given up), and the longest gap between two answers in seconds.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

addr, n, state_file, stop_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
port = int(sys.argv[5]) if len(sys.argv) > 5 else 80
conns = []


class Conn:
    def __init__(self):
        self.port = 0
        self.ok = 0
        self.errors = []
        self.gap = 0.0
        self.last = None
        self.open = False

    def run(self):
        try:
            c = http.client.HTTPConnection(addr, port, timeout=5)
            c.connect()
            self.port = c.sock.getsockname()[1]
            self.open = True
        except OSError as e:
            self.errors.append(f"connect: {type(e).__name__}: {e}")
            return
        while not os.path.exists(stop_file):
            t = time.monotonic()
            try:
                c.request("GET", "/")
                r = c.getresponse()
                body = r.read()
                if r.status != 200 or not body.startswith(b"test-pod"):
                    raise RuntimeError(f"answer {r.status} {body[:40]!r}")
                now = time.monotonic()
                if self.last is not None:
                    self.gap = max(self.gap, now - self.last)
                self.last = now
                self.ok += 1
            except Exception as e:  # a reset, a timeout, a wrong answer: this connection broke
                self.errors.append(f"{type(e).__name__}: {e}")
                self.open = False
                return
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t)))
        c.close()
        self.open = False


def dump():
    rec = [{"port": c.port, "ok": c.ok, "errors": c.errors, "gap": round(c.gap, 3), "open": c.open} for c in conns]
    tmp = state_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, state_file)


threads = []
for _ in range(n):
    c = Conn()
    conns.append(c)
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    threads.append(t)
    time.sleep(0.02)
while any(t.is_alive() for t in threads):
    dump()
    time.sleep(0.5)
dump()
