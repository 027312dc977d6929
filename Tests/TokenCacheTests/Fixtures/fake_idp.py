"""A local OpenID Connect provider on loopback for the silent-SSO tests.

Prints its port on the first line of stdout, then serves until stdin closes. `--bind HOST`
listens on another loopback address (127.0.0.2 plays a foreign host). With
`--https CERT KEY` it also serves the same state over TLS on a second loopback port, printed
on the second line (MSAL Python accepts only https authorities).
  GET  /<tenant>/v2.0/.well-known/openid-configuration   discovery
  POST /<tenant>/oauth2/v2.0/token                       refresh_token grant; refresh tokens
                                                         rotate (each is redeemable once)
  POST /control  {"seed": {...}} (a seed's "respond_as": {"uid", "utid", "username"} answers
                 with another user's identity) | {"mode": "normal|slow|fail", "delay": s} |
                 {"non_family_clients": [...]} | {"error_body": {...}|null} (every token request
                 answered 400 with that body, for hostile-server tests)
  GET  /stats    {"token_requests": n, "grants": [...]}
Each grant records client_id, outcome, redeemed and issued refresh tokens, the claims sent, the caller's SDK
(x-client-sku header, "-" when absent), and when the request arrived and was answered.
"""
import base64
import json
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"error_body": None, "mode": "normal", "delay": 0.0, "non_family_clients": set(), "refresh_tokens": {},
         "counter": 0, "token_requests": 0, "grants": []}


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.endswith("/.well-known/openid-configuration"):
            tenant = self.path.split("/")[1]
            host = "%s://%s:%d" % (self.server.scheme, self.server.server_address[0], self.server.server_port)
            return self.reply(200, {"issuer": "%s/%s/v2.0" % (host, tenant),
                                    "authorization_endpoint": "%s/%s/oauth2/v2.0/authorize" % (host, tenant),
                                    "token_endpoint": "%s/%s/oauth2/v2.0/token" % (host, tenant)})
        if self.path == "/stats":
            with lock:
                return self.reply(200, {"token_requests": state["token_requests"], "grants": state["grants"]})
        self.reply(404, {"error": "not_found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/control":
            command = json.loads(body)
            with lock:
                if "seed" in command:
                    seed = command["seed"]
                    state["refresh_tokens"][seed["refresh_token"]] = seed
                if "mode" in command:
                    state["mode"] = command["mode"]
                    state["delay"] = command.get("delay", 0)
                if "non_family_clients" in command:
                    state["non_family_clients"] = set(command["non_family_clients"])
                if "error_body" in command:
                    state["error_body"] = command["error_body"]
            return self.reply(200, {})
        if not self.path.endswith("/oauth2/v2.0/token"):
            return self.reply(404, {"error": "not_found"})
        form = dict(urllib.parse.parse_qsl(body.decode()))
        tenant = self.path.split("/")[1]
        arrived = time.time()
        with lock:
            state["token_requests"] += 1
            mode, delay, error_body = state["mode"], state["delay"], state["error_body"]
        if mode == "slow":
            time.sleep(delay)
        if error_body is not None:
            return self.reply(400, error_body)
        if mode == "fail":
            return self.reply(503, {"error": "temporarily_unavailable"}, {"Retry-After": "7"})
        if form.get("grant_type") != "refresh_token":
            return self.reply(400, {"error": "unsupported_grant_type"})
        client_id = form.get("client_id")
        grant = {"client_id": client_id, "redeemed": form.get("refresh_token"), "issued": None, "claims": form.get("claims"),
                 "sdk": self.headers.get("x-client-sku", "-"), "arrived": arrived}

        def refuse(outcome, body):
            grant.update(outcome=outcome, answered=time.time())
            state["grants"].append(grant)
            return self.reply(400, body)

        with lock:
            record = state["refresh_tokens"].get(form.get("refresh_token"))
            if record is None:
                return refuse("invalid_grant", {
                    "error": "invalid_grant", "error_description": "AADSTS70000: token was already used or is unknown",
                    "error_codes": [70000], "claims": '{"access_token":{"polids":{"essential":true}}}'})
            if record.get("family") and client_id != record["client_id"] and client_id in state["non_family_clients"]:
                return refuse("client_mismatch", {"error": "invalid_grant", "suberror": "client_mismatch", "error_codes": [70000]})
            if not record.get("family") and client_id != record["client_id"]:
                return refuse("wrong_client", {"error": "invalid_grant", "error_codes": [70000]})
            del state["refresh_tokens"][form["refresh_token"]]  # rotation: one use only
            state["counter"] += 1
            n = state["counter"]
            new_rt = "rt-rotated-%d" % n
            state["refresh_tokens"][new_rt] = dict(record, refresh_token=new_rt, client_id=client_id)
            grant.update(outcome="ok", issued=new_rt, answered=time.time())
            state["grants"].append(grant)
        scopes = [s for s in form.get("scope", "").split() if s not in ("openid", "profile", "offline_access")]
        who = dict(record, **record.get("respond_as", {}))
        response = {
            "token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600,
            "scope": " ".join(scopes), "access_token": "at-issued-%d" % n, "refresh_token": new_rt,
            "id_token": b64({"alg": "none"}) + "." + b64({"sub": "sub-" + who["uid"], "oid": who["uid"], "tid": who["utid"] if "respond_as" in record else tenant,
                                                        "preferred_username": who.get("username", "user@example.com")}) + ".sig",
            "client_info": b64({"uid": who["uid"], "utid": who["utid"]}),
        }
        if record.get("family"):
            response["foci"] = record["family"]
        self.reply(200, response)


class TLSServer(ThreadingHTTPServer):
    """TLS with the handshake in each connection's own thread, so a client that stalls or
    aborts its handshake (an untrusted certificate) never holds up the accept loop."""
    context = None

    def get_request(self):
        connection, address = self.socket.accept()
        return self.context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address


def serve(scheme, context=None, host="127.0.0.1"):
    server = (TLSServer if context else ThreadingHTTPServer)((host, 0), Handler)
    server.scheme = scheme
    server.context = context
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


arguments = sys.argv[1:]
bind = "127.0.0.1"
if arguments[:1] == ["--bind"]:
    bind, arguments = arguments[1], arguments[2:]
servers = [serve("http", host=bind)]
if len(arguments) == 3 and arguments[0] == "--https":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(arguments[1], arguments[2])
    servers.append(serve("https", context))
for server in servers:
    print(server.server_port, flush=True)
sys.stdin.read()  # serve until the test closes stdin
for server in servers:
    server.shutdown()
