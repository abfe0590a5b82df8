#!/usr/bin/python3
"""The lab's test pod: an HTTP/1.1 server (keep-alive) that answers with its pod name.

GET /          -> "NAME\n"
GET /peer      -> "NAME ADDRESS\n": the address the connection came from, as the pod sees it
GET /peer-port -> "NAME ADDRESS PORT\n": and its port
GET /blob/N    -> N bytes of a fixed pattern (the 4 KiB unit below, repeated), header X-SHA256
                  with their digest; streamed (any size, little memory), the digest of each size
                  computed once
GET /healthz   -> 200 "ok", or 503 after SIGUSR1 until SIGUSR2 (a pod failing its health check
                  while it still serves its open connections)
and a UDP echo on the same port: each datagram (up to 64 KiB: large ones arrive fragmented) is
sent back as it came.
usage: podserver.py NAME ADDRESS[,ADDRESS...] PORT   (IPv4 and IPv6 addresses: one listener each)
"""
import hashlib
import http.server
import signal
import socket
import socketserver
import sys
import threading


UNIT = bytes(range(256)) * 16
CHUNK = UNIT * 64  # 256 KiB, a whole number of units: the chunks of a blob are its pattern
digests, digests_lock = {}, threading.Lock()
sick = False


def set_sick(signum, _frame):
    global sick
    sick = signum == signal.SIGUSR1


def chunks(n):
    """The blob of n bytes, in pieces of at most CHUNK."""
    while n > 0:
        piece = CHUNK if n >= len(CHUNK) else CHUNK[:n]
        yield piece
        n -= len(piece)


def digest(n):
    with digests_lock:
        if n not in digests:
            h = hashlib.sha256()
            for piece in chunks(n):
                h.update(piece)
            digests[n] = h.hexdigest()
        return digests[n]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/blob/"):
            n = int(self.path.split("/")[2])
            body, length, extra = chunks(n), n, {"X-SHA256": digest(n)}
        elif self.path == "/healthz":
            text = b"unavailable\n" if sick else b"ok\n"
            self.send_response(503 if sick else 200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        elif self.path == "/peer-port":
            name = f"{self.server.pod} {self.client_address[0]} {self.client_address[1]}\n".encode()
            body, length, extra = [name], len(name), {}
        elif self.path == "/peer":
            name = f"{self.server.pod} {self.client_address[0]}\n".encode()
            body, length, extra = [name], len(name), {}
        else:
            name = (self.server.pod + "\n").encode()
            body, length, extra = [name], len(name), {}
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(length))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        for piece in body:
            self.wfile.write(piece)

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.client_address[0], fmt % args))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        # HTTPServer.server_bind asks DNS for its own name (getfqdn): not in a sealed lab.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class Server6(Server):
    address_family = socket.AF_INET6


def udp_echo(addr, port):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(65535)
        s.sendto(data, peer)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, set_sick)
    signal.signal(signal.SIGUSR2, set_sick)
    name, addrs, port = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
    servers = []
    for addr in addrs:
        srv = (Server6 if ":" in addr else Server)((addr, port), Handler)
        srv.pod = name
        servers.append(srv)
    for srv in servers[1:]:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    for addr in addrs:
        threading.Thread(target=udp_echo, args=(addr, port), daemon=True).start()
    servers[0].serve_forever()
