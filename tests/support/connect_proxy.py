"""An HTTP CONNECT proxy on loopback, for the tests: it records each CONNECT target and tunnels to
127.0.0.1 at the target's port whatever the host (kube.test resolves only here, so a client that
reaches the server by that name went through the proxy)."""
import select
import socket
import socketserver
import threading


class ConnectProxy:
    def __init__(self):
        self.connects = []  # "host:port" of every CONNECT
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                line = self.rfile.readline(8192).decode("latin-1").split()
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                if len(line) < 2 or line[0] != "CONNECT":
                    self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    return
                proxy.connects.append(line[1])
                port = int(line[1].rsplit(":", 1)[1])
                try:
                    up = socket.create_connection(("127.0.0.1", port), timeout=5)
                except OSError:
                    self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                    return
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                down = self.connection
                up.settimeout(None)
                try:
                    while True:
                        r, _, _ = select.select([down, up], [], [], 120)
                        if not r:
                            return
                        for s in r:
                            data = s.recv(65536)
                            if not data:
                                return
                            (up if s is down else down).sendall(data)
                except OSError:
                    return
                finally:
                    up.close()

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
