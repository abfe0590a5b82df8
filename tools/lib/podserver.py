#!/usr/bin/python3
"""The lab's test pod: an HTTP/1.1 server (keep-alive) that answers with its pod name.

GET /          -> "NAME\n"
GET /blob/N    -> N bytes of a fixed pattern (blob(N) below), header X-SHA256 with their digest
and a UDP echo on the same port: each datagram (up to 64 KiB: large ones arrive fragmented) is
sent back as it came.
usage: podserver.py NAME ADDRESS[,ADDRESS...] PORT   (IPv4 and IPv6 addresses: one listener each)
"""
import hashlib
import http.server
import socket
import socketserver
import sys
import threading


def blob(n):
    unit = bytes(range(256)) * 16
    return (unit * (n // len(unit) + 1))[:n]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path.startswith("/blob/"):
            body = blob(int(self.path.split("/")[2]))
            extra = {"X-SHA256": hashlib.sha256(body).hexdigest()}
        else:
            body = (self.server.pod + "\n").encode()
            extra = {}
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

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
