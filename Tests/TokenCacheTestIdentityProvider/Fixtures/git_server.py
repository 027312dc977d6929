"""A git smart-HTTP server on loopback that plays Azure Repos for the git credential tests.

    git_server.py --root DIR --idp http://127.0.0.1:PORT --scope SCOPE

Serves the repositories under DIR with the real `git http-backend` (CGI) and prints its port on
the first line of stdout, then serves until stdin closes. A request is let through only with
`Authorization: Basic` whose password, or `Authorization: Bearer`, is an access token the test
identity provider (fake_idp.py, asked at GET /introspect) says is active and issued for SCOPE;
any other request gets 401 with `WWW-Authenticate: Basic realm="git"`, as Azure Repos answers.
  GET  /_stats    {"accepted": [tokens let through, in order], "refused": n (requests with a
                  credential that was refused), "anonymous": n}
  POST /_revoke   revokes, at the identity provider, the last token let through (as a server
                  that stops honouring a token before it expires)
"""
import base64
import json
import os
import subprocess
import sys
import threading

from resource_gate import Gate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
ROOT, IDP, SCOPE = args["--root"], args["--idp"], args["--scope"]
gate = Gate(IDP, SCOPE)


def presented_token(header):
    if header.startswith("Bearer "):
        return header[len("Bearer "):]
    if header.startswith("Basic "):
        try:
            _, _, password = base64.b64decode(header[len("Basic "):]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return ""
        return password
    return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    return data
                data += chunk
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def authorized(self):
        token = presented_token(self.headers.get("Authorization", ""))
        if gate.admits(token):
            return token
        self.reply(401, {"message": "TF400813: not authorized"}, {"WWW-Authenticate": 'Basic realm="git"'})
        return None

    def do_GET(self):
        if self.path == "/_stats":
            return self.reply(200, gate.stats())
        self.git(b"")

    def do_POST(self):
        body = self.body()
        if self.path == "/_revoke":
            gate.revoke_last()
            return self.reply(200, {})
        self.git(body)

    def git(self, body):
        if self.authorized() is None:
            return
        path, _, query = self.path.partition("?")
        environment = dict(os.environ, GIT_PROJECT_ROOT=ROOT, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path, QUERY_STRING=query,
                           REQUEST_METHOD=self.command, CONTENT_TYPE=self.headers.get("Content-Type", ""),
                           CONTENT_LENGTH=str(len(body)), REMOTE_USER="git-user", REMOTE_ADDR="127.0.0.1",
                           GATEWAY_INTERFACE="CGI/1.1", SERVER_PROTOCOL="HTTP/1.1")
        for header, variable in (("Git-Protocol", "GIT_PROTOCOL"), ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
            if self.headers.get(header):
                environment[variable] = self.headers[header]
        output = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=environment).stdout
        head, _, payload = output.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = output.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            else:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
