#!/usr/bin/env python3
"""Fakes for tests/integration/test_k8s_sidecar.sh.

  k8s_fake.py server DIR [CERT KEY]   a fake API server and kubelet: GET /api/v1/pods and GET /pods answer
                                      DIR/pods.json as it is at the time (the test rewrites it), PATCH
                                      /api/v1/nodes/NAME/status answers 200; every request is appended to
                                      DIR/requests.log as one JSON line (method, path, headers, body). Two
                                      sentinels in pods.json make hostile answers: "#HUGE-LEN" (4 MiB with a
                                      Content-Length) and "#HUGE-STREAM" (4 MiB, no length, then the close).
                                      Writes its port to DIR/port once it listens (HTTPS with CERT and KEY).
  k8s_fake.py ctl DIR ARGS...         a fake cuasyncctl: appends ARGS as a JSON list to DIR/ctl.log; for
                                      `--json tenant list` prints DIR/tenants.json; exit 0.
"""
import http.server
import json
import os
import ssl
import sys


def server(d, cert=None, key=None):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def record(self, body):
            with open(os.path.join(d, "requests.log"), "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path,
                                    "authorization": self.headers.get("Authorization"),
                                    "content_type": self.headers.get("Content-Type"),
                                    "body": body.decode("utf-8", "replace")}) + "\n")

        def send(self, code, body, length=True):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            if length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass  # the sidecar closed a body it found too long: what it should do

        def do_GET(self):
            self.record(b"")
            if not (self.path.startswith("/api/v1/pods") or self.path == "/pods"):
                return self.send(404, b'{"kind":"Status","code":404}')
            with open(os.path.join(d, "pods.json"), "rb") as f:
                body = f.read()
            if body.startswith(b"#HUGE-LEN"):
                return self.send(200, b'{"items":[' + b" " * (4 << 20) + b"]}")
            if body.startswith(b"#HUGE-STREAM"):
                self.send_response(200)
                self.end_headers()
                try:
                    for _ in range(64):
                        self.wfile.write(b" " * (64 << 10))
                except OSError:
                    pass  # the sidecar closed it: what it should do
                return
            self.send(200, body)

        def do_PATCH(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(min(n, 1 << 16))
            self.record(body)
            self.send(200, b'{"kind":"Node"}')

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(os.path.join(d, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
    srv.serve_forever()


def ctl(d, args):
    with open(os.path.join(d, "ctl.log"), "a") as f:
        f.write(json.dumps(args) + "\n")
    if args[-3:] == ["--json", "tenant", "list"] or args[-2:] == ["tenant", "list"]:
        p = os.path.join(d, "tenants.json")
        if os.path.exists(p):
            with open(p) as f:
                sys.stdout.write(f.read())
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(*sys.argv[2:])
    else:
        sys.exit(ctl(sys.argv[2], sys.argv[3:]))
