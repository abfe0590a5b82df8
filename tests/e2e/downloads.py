#!/usr/bin/python3
"""Paced bulk downloads for the HA load test, run inside the client's namespace.

usage: downloads.py STATE_FILE STOP_FILE RATE SIZE URL [URL...]
One thread per URL (http://HOST[:PORT]; an IPv6 host in brackets): download /blob/SIZE from the
lab's pod server over a new connection, paced to RATE bytes per second, check it against the
server's X-SHA256 header and its length, and start again, until STOP_FILE exists (the download in
hand is finished first). STATE_FILE is rewritten every 0.5 s and at the end with one record per URL:
downloads intact, errors (a reset, a timeout, a wrong digest: that download counts as broken and the
next one starts), bytes received, seconds spent, and the longest stall between two reads.
"""
import hashlib
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

state_file, stop_file, rate, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
urls = sys.argv[5:]
PIECE = 64 * 1024


class Loader:
    def __init__(self, url):
        self.url = urllib.parse.urlsplit(url)
        self.intact, self.errors, self.bytes, self.stall, self.seconds = 0, [], 0, 0.0, 0.0
        self.running = True

    def one(self):
        c = http.client.HTTPConnection(self.url.hostname, self.url.port or 80, timeout=10)
        started, got = time.time(), 0
        try:
            c.request("GET", f"/blob/{size}")
            r = c.getresponse()
            want = r.getheader("X-SHA256")
            h, t0 = hashlib.sha256(), time.monotonic()
            last = t0
            while got < size:
                piece = r.read(min(PIECE, size - got))
                if not piece:
                    raise RuntimeError(f"closed after {got} of {size} bytes")
                now = time.monotonic()
                self.stall = max(self.stall, now - last)
                last = now
                h.update(piece)
                got += len(piece)
                self.bytes += len(piece)
                ahead = t0 + got / rate - time.monotonic()  # paced: never faster than RATE
                if ahead > 0:
                    time.sleep(ahead)
            if r.status != 200 or h.hexdigest() != want:
                raise RuntimeError(f"status {r.status}, digest {h.hexdigest()[:12]} against {str(want)[:12]}")
            self.intact += 1
        except Exception as e:  # a reset, a timeout, a short or wrong body: this download broke
            port = c.sock.getsockname()[1] if c.sock else None
            begun, now = time.strftime("%H:%M:%S", time.localtime(started)), time.strftime("%H:%M:%S")
            self.errors.append(f"{type(e).__name__}: {e} (port {port}, begun {begun}, broke {now} after {got} bytes)")
        finally:
            c.close()

    def run(self):
        t0 = time.monotonic()
        while not os.path.exists(stop_file):
            self.one()
            self.seconds = time.monotonic() - t0
        self.running = False


def dump(loaders):
    rec = [{"url": l.url.geturl(), "intact": l.intact, "errors": l.errors, "bytes": l.bytes,
            "seconds": round(l.seconds, 2), "stall": round(l.stall, 3), "running": l.running} for l in loaders]
    tmp = state_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, state_file)


loaders = [Loader(u) for u in urls]
threads = [threading.Thread(target=l.run, daemon=True) for l in loaders]
for t in threads:
    t.start()
while any(t.is_alive() for t in threads):
    dump(loaders)
    time.sleep(0.5)
dump(loaders)
