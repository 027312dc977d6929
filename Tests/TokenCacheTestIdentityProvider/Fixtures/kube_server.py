"""A Kubernetes API server stand-in over TLS on loopback, for the kubectl credential plugin tests.

    kube_server.py --cert PEM --key KEY --idp http://127.0.0.1:PORT --scope SCOPE

Prints its port on the first line of stdout, then serves until stdin closes. `GET /version`
answers the version document only for `Authorization: Bearer` with an access token the test
identity provider (fake_idp.py, GET /introspect) says is active and issued for SCOPE; anything
else gets 401 with a Status object, as the API server answers.
  GET  /_stats    {"accepted": [tokens let through, in order], "refused": n, "anonymous": n, "refused_tokens": [...]}
  POST /_revoke   revokes, at the identity provider, the last token let through
"""
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from resource_gate import Gate

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
IDP, SCOPE = args["--idp"], args["--scope"]
gate = Gate(IDP, SCOPE)
VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-tokencache-test", "platform": "linux/amd64"}
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                "reason": "Unauthorized", "code": 401}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_stats":
            return self.reply(200, gate.stats())
        authorization = self.headers.get("Authorization", "")
        if not gate.admits(authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None):
            return self.reply(401, UNAUTHORIZED)
        if self.path == "/version":
            return self.reply(200, VERSION)
        self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})

    def do_POST(self):
        if self.path == "/_revoke":
            gate.revoke_last()
            return self.reply(200, {})
        self.reply(404, {})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(args["--cert"], args["--key"])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
