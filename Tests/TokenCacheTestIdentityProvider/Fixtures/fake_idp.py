"""A local OpenID Connect provider on loopback for the silent-SSO tests.

Prints its port on the first line of stdout, then serves until stdin closes. `--bind HOST`
listens on another loopback address (127.0.0.2 plays a foreign host). With
`--https CERT KEY` it also serves the same state over TLS on a second loopback port, printed
on the second line (MSAL Python accepts only https authorities). `--https-port PORT` (before
`--https`) makes that port PORT (443: the provider plays a real host such as login.microsoftonline.com,
mapped to loopback by scripts/with-broker-harness.sh); that server's discovery then names endpoints
at the host the request's Host header names, as the real service does. `--log FILE` appends a line
for every request no endpoint serves (method, path), to find out what a client asks for.
  GET  /<tenant>/v2.0/.well-known/openid-configuration   discovery
  GET  /common/discovery/instance?authorization_endpoint=U  Entra's instance discovery (the public cloud's aliases)
  POST /<tenant>/oauth2/v2.0/token                       refresh_token grant; refresh tokens
                                                         rotate (each is redeemable once)
  POST /control  {"tenant_domains": {domain: tenant ID}} (as Entra resolves a tenant's domain: discovery at
                 /<domain>/... names endpoints at /<tenant ID>/..., and tokens issued at /<domain>/... carry the
                 tenant ID) | {"seed": {...}} (a seed's "respond_as": {"uid", "utid", "username"} answers
                 with another user's identity) | {"mode": "normal|slow|fail", "delay": s} |
                 {"non_family_clients": [...]} | {"error_body": {...}|null} (every token request
                 answered 400 with that body, for hostile-server tests)
  GET  /stats    {"token_requests": n, "discovery_requests": n, "grants": [...], "authorize_requests": [...],
                 "device_polls": [...], "device_authorizations": [{"client_id", "claims"}],
                 "issued_refresh_tokens": [every refresh token it issued, by any grant]} (grants and polls
                 record the `claims` they carried too; a refresh grant that rotated, its "account" (uid)
                 and the "access_token" issued with its new refresh token, in the order issued)
  POST /control  also {"expires_in": s} (the lifetime of the access tokens it issues from then on; default 3600)
Sign-in (authorization code with PKCE, device code), on the same paths under any prefix: the
tenant (/<tenant>/oauth2/v2.0/...), a B2C policy (/tfp/<tenant>/<policy>/oauth2/v2.0/...), AD FS
(/adfs/oauth2/..., no device endpoint) and a generic OIDC issuer (/oidc/authorize, /oidc/token,
/oidc/device_authorization); discovery at <prefix>[/v2.0]/.well-known/openid-configuration.
  GET  <prefix>/.../authorize     login page: a form with the username (login_hint), Sign in and
                                  Cancel; with browser_action "submit"/"cancel" a script presses it
  POST <prefix>/.../authorize     302 to redirect_uri with code and state, or error=access_denied
                                  &error_subcode=cancel
  POST <prefix>/.../devicecode    device authorization (RFC 8628): device_code, user_code, interval
  POST .../token                  also grant_type authorization_code (code_verifier checked against
                                  the S256 challenge, redirect_uri and client_id matched, each code
                                  redeemable once) and urn:ietf:params:oauth:grant-type:device_code
  POST /control  also {"browser_action": "submit|cancel|none"} | {"sign_in_user": {"uid", "utid",
                 "username"[, "name"]}} | {"family_clients": {client_id: family}} | {"tamper_state": bool}
                 (the redirect carries another state) | {"pkce_challenge_override": str|null} (the
                 code is bound to another challenge, as an injected code would be) |
                 {"nonce_override": str|null} (the ID token of a code carries that nonce, not the request's) |
                 {"approve_device"|"deny_device"|"expire_device": user_code} | {"device_slow_down": n}
                 (the next n polls answer slow_down) | {"device_interval": s, "device_expires_in": s}
                 (a code is honoured until expire_device: the provider keeps no time of its own, so a
                 client on a manual clock is never raced by real time)
                 | {"omit_device_endpoint": bool} | {"device_message": str}
Microsoft Graph stand-in (as Graph documents /me and /me/photo/$value), for the access tokens
this provider issued (another token, or none, is 401 InvalidAuthenticationToken):
  GET  /v1.0/me                   the token's user: id, displayName, userPrincipalName, mail
  GET  /v1.0/me/photo/$value      the user's photo with its Content-Type, or 404 ImageNotFound
  POST /control  also {"graph_photos": {uid: {"content_type": str, "base64": str} | {"content_type": str,
                 "size": n} (n bytes of a PNG signature and padding) | null}} | {"graph_offline": bool}
                 (Graph requests are answered 503)
  GET  /graph/stats  {"requests": [{"path", "user"}]}
Continuous access evaluation (docs: "Claims challenges, claims requests and client capabilities"):
  GET  /resource                  a protected resource for the access tokens this provider issued:
                                  200 {"user": uid}; with a challenge set, a token whose request
                                  declared cp1 (claims access_token.xms_cc.values) but did not carry
                                  the challenge's access_token claims gets 401 with
                                  WWW-Authenticate: Bearer realm="", authorization_uri="...",
                                  error="insufficient_claims", claims="<base64 of the challenge>"; a
                                  token of a client without cp1 gets a plain 401 invalid_token (the
                                  resource may only challenge capable clients); unknown token: 401
  POST /control  also {"cae_challenge": claims JSON str|null} | {"refresh_interaction_claims": claims
                 JSON str|null} (every refresh grant refused as Entra refuses one that conditional
                 access stops: interaction_required, AADSTS50076, suberror basic_action, with `claims`)
  GET  /resource/stats  {"requests": [{"user", "status"}]}
Token introspection, for stand-ins of other resources (the git server of the git credential tests):
  GET  /introspect   Authorization: Bearer <access token>: {"active": bool, "scopes": [...], "user": uid}; active
                     while the token is one this provider issued, unexpired (its expires_in from issue, on the
                     real clock) and not revoked
  POST /control  also {"revoke_access_token": token} (introspection answers inactive for it from then on)
Native authentication (initiate, challenge, sign-up, password reset and their token grants): native_auth.py.
Each grant records client_id, outcome, redeemed and issued refresh tokens, the claims sent, the caller's SDK
(x-client-sku header, "-" when absent), and when the request arrived and was answered; a refresh grant also
the Host header and path it was sent to.
"""
import base64
import hashlib
import html
import json
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import native_auth

lock = threading.Lock()
state = {"error_body": None, "mode": "normal", "delay": 0.0, "non_family_clients": set(), "refresh_tokens": {},
         "counter": 0, "token_requests": 0, "discovery_requests": 0, "grants": [], "expires_in": 3600, "issued_refresh_tokens": [],
         # sign-in flows
         "browser_action": "none", "sign_in_user": None, "family_clients": {}, "tamper_state": False,
         "pkce_challenge_override": None, "auth_codes": {}, "authorize_requests": [], "device_codes": {},
         "device_polls": [], "device_authorizations": [], "device_slow_down": 0, "device_interval": 1, "device_expires_in": 600,
         "omit_device_endpoint": False, "device_message": None, "nonce_override": None, "tenant_domains": {},
         # the Graph stand-in
         "access_tokens": {}, "graph_photos": {}, "graph_requests": [], "graph_offline": False,
         # continuous access evaluation: the claims each access token's request carried
         "access_token_claims": {}, "access_token_info": {}, "cae_challenge": None, "refresh_interaction_claims": None, "resource_requests": []}
CONTROL_SETTINGS = ("expires_in", "tenant_domains", "browser_action", "sign_in_user", "family_clients", "tamper_state", "pkce_challenge_override",
                    "device_slow_down", "device_interval", "device_expires_in", "omit_device_endpoint", "device_message",
                    "nonce_override", "graph_offline", "cae_challenge", "refresh_interaction_claims")
RESERVED = ("openid", "profile", "offline_access")


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def parsed_claims(text):
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def token_response(n, refresh_token, scopes, who, tid, family, client_info=True, nonce=None, request_claims=None):
    """The token response every grant gives: the refresh grant's shape (an ID token of a code
    whose request had a nonce carries it, as OIDC Core 3.1.3.6 requires)."""
    claims = {"sub": "sub-" + who["uid"], "oid": who["uid"], "tid": tid, "preferred_username": who.get("username", "user@example.com")}
    if "name" in who:
        claims["name"] = who["name"]
    if nonce is not None:
        claims["nonce"] = nonce
    response = {
        "token_type": "Bearer", "expires_in": state["expires_in"], "ext_expires_in": state["expires_in"],
        "scope": " ".join(scopes), "access_token": "at-issued-%d" % n, "refresh_token": refresh_token,
        "id_token": b64({"alg": "none"}) + "." + b64(claims) + ".sig",
    }
    state["access_tokens"][response["access_token"]] = who
    state["access_token_claims"][response["access_token"]] = parsed_claims(request_claims)
    state["access_token_info"][response["access_token"]] = {"scopes": scopes, "expires_at": time.time() + state["expires_in"],
                                                             "revoked": False, "user": who["uid"]}
    state["issued_refresh_tokens"].append(refresh_token)
    if client_info:
        response["client_info"] = b64({"uid": who["uid"], "utid": who["utid"]})
    if family:
        response["foci"] = family
    return response


def prefix_of(path):
    """The authority part of an endpoint path: what comes before /oauth2/, /v2.0/.well-known, ..."""
    path = path.split("?")[0]
    for marker in ("/v2.0/.well-known/", "/.well-known/", "/oauth2/"):
        if marker in path:
            return path[:path.index(marker)]
    if path.startswith("/oidc/"):
        return "/oidc"
    return path.rsplit("/", 1)[0]


def tenant_of(segment):
    """The tenant ID a path's tenant segment names: a domain resolves to its tenant's ID, as in Entra."""
    return next((tenant for domain, tenant in state["tenant_domains"].items() if domain.lower() == segment.lower()), segment)


def endpoints(host, prefix):
    if prefix.startswith("/oidc"):
        return {"issuer": host + prefix, "authorization_endpoint": host + prefix + "/authorize",
                "token_endpoint": host + prefix + "/token", "device_authorization_endpoint": host + prefix + "/device_authorization"}
    if prefix == "/adfs":  # AD FS 2016: no device code flow
        return {"issuer": host + prefix, "authorization_endpoint": host + prefix + "/oauth2/authorize",
                "token_endpoint": host + prefix + "/oauth2/token"}
    # Entra's discovery of /<domain> names the tenant's endpoints at /<tenant ID> (MSAL keys tokens by it).
    parts = prefix.split("/")
    prefix = "/".join(parts[:1] + [tenant_of(parts[1])] + parts[2:]) if len(parts) > 1 else prefix
    found = {"issuer": host + prefix + "/v2.0", "authorization_endpoint": host + prefix + "/oauth2/v2.0/authorize",
             "token_endpoint": host + prefix + "/oauth2/v2.0/token"}
    if not state["omit_device_endpoint"]:
        found["device_authorization_endpoint"] = host + prefix + "/oauth2/v2.0/devicecode"
    return found


def s256(verifier):
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Sign in</title></head><body>
<form id="login" method="post" action="%(action)s">
<input type="hidden" name="fields" value="%(fields)s">
<label>Username <input name="username" value="%(username)s"></label>
<input type="hidden" id="choice" name="choice" value="">
<button type="submit" name="choice" value="signin">Sign in</button>
<button type="submit" name="choice" value="cancel">Cancel</button>
</form>%(script)s</body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=None, content_type="application/json"):
        data = json.dumps(body).encode() if content_type == "application/json" else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def graph(self):
        """Graph's /me and /me/photo/$value for the user of an access token this provider issued."""
        authorization = self.headers.get("Authorization", "")
        with lock:
            who = state["access_tokens"].get(authorization[len("Bearer "):]) if authorization.startswith("Bearer ") else None
            state["graph_requests"].append({"path": self.path, "user": who["uid"] if who else None})
            offline = state["graph_offline"]
            photo = state["graph_photos"].get(who["uid"]) if who else None
        if offline:
            return self.reply(503, {"error": {"code": "serviceNotAvailable", "message": "Service unavailable"}})
        if who is None:
            return self.reply(401, {"error": {"code": "InvalidAuthenticationToken", "message": "Access token is empty."}})
        if self.path == "/v1.0/me":
            username = who.get("username", "user@example.com")
            return self.reply(200, {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users/$entity", "id": who["uid"],
                                    "displayName": who.get("name", username.split("@")[0].capitalize()),
                                    "userPrincipalName": username, "mail": username})
        if photo is None:
            return self.reply(404, {"error": {"code": "ImageNotFound", "message": "Exception of type 'Microsoft.Fast.Profile.Core.Exception.ImageNotFoundException' was thrown."}})
        data = base64.b64decode(photo["base64"]) if "base64" in photo else (b"\x89PNG\r\n\x1a\n" + b"\0" * max(photo["size"] - 8, 0))[:photo["size"]]
        self.send_response(200)
        self.send_header("Content-Type", photo["content_type"])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def resource(self):
        """A resource enforcing continuous access evaluation for this provider's access tokens."""
        authorization = self.headers.get("Authorization", "")
        token = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None
        with lock:
            who = state["access_tokens"].get(token)
            requested = state["access_token_claims"].get(token, {})
            challenge = state["cae_challenge"]

            def answer(status, body, headers=None):
                state["resource_requests"].append({"user": who["uid"] if who else None, "status": status})
                return self.reply(status, body, headers)
            if who is None:
                return answer(401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer realm="", error="invalid_token"'})
            if challenge is not None:
                wanted = parsed_claims(challenge).get("access_token", {})
                carried = requested.get("access_token", {}) if isinstance(requested.get("access_token"), dict) else {}
                capable = "cp1" in ((carried.get("xms_cc") or {}).get("values") or [])
                if any(carried.get(name) != value for name, value in wanted.items()):
                    if not capable:
                        return answer(401, {"error": "invalid_token"}, {"WWW-Authenticate": 'Bearer realm="", error="invalid_token"'})
                    header = ('Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", '
                              'error="insufficient_claims", claims="%s"' % base64.b64encode(challenge.encode()).decode())
                    return answer(401, {"error": "insufficient_claims"}, {"WWW-Authenticate": header})
            return answer(200, {"user": who["uid"]})

    def do_GET(self):
        if self.path in ("/v1.0/me", "/v1.0/me/photo/$value"):
            return self.graph()
        if self.path == "/resource":
            return self.resource()
        if self.path == "/introspect":
            authorization = self.headers.get("Authorization", "")
            with lock:
                info = state["access_token_info"].get(authorization[len("Bearer "):]) if authorization.startswith("Bearer ") else None
                active = info is not None and not info["revoked"] and time.time() < info["expires_at"]
                return self.reply(200, {"active": active, "scopes": info["scopes"] if info else [], "user": info["user"] if info else None})
        if self.path == "/resource/stats":
            with lock:
                return self.reply(200, {"requests": state["resource_requests"]})
        if self.path == "/graph/stats":
            with lock:
                return self.reply(200, {"requests": state["graph_requests"]})
        if self.path.split("?")[0] == "/common/discovery/instance":
            return self.instance_discovery()
        if self.path.endswith("/.well-known/openid-configuration"):
            host = "%s://%s:%d" % (self.server.scheme, self.server.server_address[0], self.server.server_port)
            if self.server.named_host and self.headers.get("Host"):
                host = "%s://%s" % (self.server.scheme, self.headers["Host"])
            with lock:
                state["discovery_requests"] += 1
                return self.reply(200, endpoints(host, prefix_of(self.path)))
        if self.path == "/native/stats":
            with lock:
                return self.reply(200, native_auth.stats())
        if self.path == "/stats":
            with lock:
                return self.reply(200, {"token_requests": state["token_requests"], "discovery_requests": state["discovery_requests"],
                                        "grants": state["grants"], "issued_refresh_tokens": state["issued_refresh_tokens"],
                                        "authorize_requests": state["authorize_requests"], "device_polls": state["device_polls"],
                                        "device_authorizations": state["device_authorizations"]})
        if self.path.split("?")[0].endswith("/authorize"):
            return self.login_page()
        self.not_found()

    def instance_discovery(self):
        """Entra's instance discovery (GET /common/discovery/instance?api-version=1.1&authorization_endpoint=...),
        which MSAL calls to learn a cloud's host aliases: the public cloud's metadata, and the tenant discovery
        endpoint of the authority the authorization endpoint names."""
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        endpoint = urllib.parse.urlsplit(query.get("authorization_endpoint", ""))
        tenant = (endpoint.path.split("/") + ["", ""])[1] or "common"
        host = self.headers.get("Host") if self.server.named_host else "%s:%d" % self.server.server_address[:2]
        self.reply(200, {"tenant_discovery_endpoint": "%s://%s/%s/v2.0/.well-known/openid-configuration" % (self.server.scheme, host, tenant),
                         "api-version": "1.1",
                         "metadata": [{"preferred_network": "login.microsoftonline.com", "preferred_cache": "login.windows.net",
                                       "aliases": ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"]}]})

    def not_found(self):
        if unserved_log:
            with lock, open(unserved_log, "a") as log:
                log.write("%s %s %s\n" % (self.command, self.headers.get("Host", "-"), self.path))
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
                if command.get("revoke_access_token") in state["access_token_info"]:
                    state["access_token_info"][command["revoke_access_token"]]["revoked"] = True
                for uid, photo in command.get("graph_photos", {}).items():
                    state["graph_photos"][uid] = photo
                native_auth.control(command)
                for key in CONTROL_SETTINGS:
                    if key in command:
                        state[key] = command[key]
                for key, status in (("approve_device", "approved"), ("deny_device", "denied"), ("expire_device", "expired")):
                    for record in state["device_codes"].values():
                        if key in command and record["user_code"] == command[key]:
                            record["status"] = status
            return self.reply(200, {})
        if self.path.split("?")[0].endswith("/authorize"):
            return self.login_submitted(dict(urllib.parse.parse_qsl(body.decode())))
        if self.path.endswith("/devicecode") or self.path.endswith("/device_authorization"):
            return self.device_authorization(dict(urllib.parse.parse_qsl(body.decode())))
        if not (native_auth.handles(self.path, {}) or self.path.endswith("/oauth2/v2.0/token") or self.path.endswith("/oauth2/token") or self.path == "/oidc/token"):
            return self.not_found()
        form = dict(urllib.parse.parse_qsl(body.decode()))
        with lock:
            tenant = tenant_of(self.path.split("/")[1])
        if native_auth.handles(self.path, form):
            with lock:
                return self.reply(*native_auth.handle(self.path, form, self.issue, tenant))
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
        if form.get("grant_type") == "authorization_code":
            return self.redeem_code(form, tenant)
        if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:device_code":
            return self.redeem_device_code(form, tenant)
        if form.get("grant_type") != "refresh_token":
            return self.reply(400, {"error": "unsupported_grant_type"})
        client_id = form.get("client_id")
        grant = {"client_id": client_id, "redeemed": form.get("refresh_token"), "issued": None, "claims": form.get("claims"),
                 "sdk": self.headers.get("x-client-sku", "-"), "arrived": arrived, "host": self.headers.get("Host", "-"),
                 "path": self.path}

        def refuse(outcome, body):
            grant.update(outcome=outcome, answered=time.time())
            state["grants"].append(grant)
            return self.reply(400, body)

        with lock:
            record = state["refresh_tokens"].get(form.get("refresh_token"))
            if state["refresh_interaction_claims"] is not None and record is not None:
                # As Entra refuses a refresh that conditional access stops (MFA required): the
                # refresh token stays valid; the claims go to the interactive sign-in.
                return refuse("interaction_required", {
                    "error": "interaction_required", "suberror": "basic_action", "error_codes": [50076],
                    "error_description": "AADSTS50076: Due to a configuration change made by your administrator, or because you moved to a new location, you must use multi-factor authentication to access the resource.",
                    "error_uri": "https://login.microsoftonline.com/error?code=50076", "claims": state["refresh_interaction_claims"]})
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
            # The account and the access token issued with the new refresh token (token_response's "at-issued-N").
            grant.update(outcome="ok", issued=new_rt, account=record["uid"], access_token="at-issued-%d" % n, answered=time.time())
            state["grants"].append(grant)
        scopes = [s for s in form.get("scope", "").split() if s not in RESERVED]
        who = dict(record, **record.get("respond_as", {}))
        self.reply(200, token_response(n, new_rt, scopes, who, who["utid"] if "respond_as" in record else tenant, record.get("family"),
                                       request_claims=form.get("claims")))

    # --- Sign-in flows ---

    def page(self, status, text, headers=None):
        self.reply(status, text, headers, content_type="text/html; charset=utf-8")

    def login_page(self):
        """The authorization endpoint's login page; the request's parameters ride in a hidden field."""
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        with lock:
            state["authorize_requests"].append(dict(query, path=self.path.split("?")[0]))
            action, user = state["browser_action"], state["sign_in_user"] or {}
        username = query.get("login_hint") or user.get("username", "user@example.com")
        script = ""
        if action in ("submit", "cancel"):  # the IdP plays the user: press the button from JavaScript
            script = "<script>document.getElementById('choice').value='%s';document.getElementById('login').submit();</script>" % (
                "signin" if action == "submit" else "cancel")
        self.page(200, LOGIN_PAGE % {"action": html.escape(self.path.split("?")[0]), "fields": html.escape(json.dumps(query)),
                                     "username": html.escape(username), "script": script})

    def login_submitted(self, form):
        query = json.loads(form.get("fields", "{}"))
        redirect_uri, request_state = query.get("redirect_uri", ""), query.get("state", "")
        if not redirect_uri.startswith("http://localhost:") and not redirect_uri.startswith("http://127.0.0.1:"):
            return self.page(400, "redirect_uri not registered")
        with lock:
            if state["tamper_state"]:
                request_state = "tampered-" + request_state
            if form.get("choice") != "signin":
                params = {"error": "access_denied", "error_subcode": "cancel",
                          "error_description": "AADSTS50058: the user cancelled", "state": request_state}
            else:
                state["counter"] += 1
                code = "authcode-%d" % state["counter"]
                state["auth_codes"][code] = {
                    "client_id": query.get("client_id"), "redirect_uri": redirect_uri, "scope": query.get("scope", ""),
                    "challenge": state["pkce_challenge_override"] or query.get("code_challenge"),
                    "method": query.get("code_challenge_method"), "username": form.get("username", "user@example.com"),
                    "nonce": state["nonce_override"] or query.get("nonce")}
                params = {"code": code, "state": request_state}
        self.page(302, "", {"Location": redirect_uri + ("&" if "?" in redirect_uri else "?") + urllib.parse.urlencode(params)})

    def issue(self, client_id, scope, username, tenant, client_info, user=None, nonce=None, request_claims=None):
        """Tokens for the signed-in user (`user`, else sign_in_user, else one made from the username);
        the new refresh token is redeemable like a seeded one. Call with the lock held."""
        user = dict(user or state["sign_in_user"] or {"uid": "uid-" + username.split("@")[0], "utid": tenant})
        user["username"] = username
        family = state["family_clients"].get(client_id)
        state["counter"] += 1
        n = state["counter"]
        new_rt = "rt-rotated-%d" % n
        state["refresh_tokens"][new_rt] = dict(user, refresh_token=new_rt, client_id=client_id, family=family)
        scopes = [s for s in scope.split() if s not in RESERVED]
        return token_response(n, new_rt, scopes, user, user["utid"], family, client_info, nonce, request_claims)

    def redeem_code(self, form, tenant):
        grant = {"client_id": form.get("client_id"), "redeemed": None, "issued": None, "sdk": self.headers.get("x-client-sku", "-"),
                 "arrived": time.time(), "grant_type": "authorization_code", "client_info": form.get("client_info") == "1",
                 "claims": form.get("claims")}
        with lock:
            record = state["auth_codes"].pop(form.get("code"), None)  # single use
            problem = None
            if record is None:
                problem = "AADSTS54005: the code was already redeemed or is unknown"
            elif record["client_id"] != form.get("client_id") or record["redirect_uri"] != form.get("redirect_uri"):
                problem = "AADSTS50011: client_id or redirect_uri does not match the authorization request"
            elif record["method"] != "S256" or s256(form.get("code_verifier", "")) != record["challenge"]:
                problem = "AADSTS501481: the code_verifier does not match the code_challenge"
            if problem:
                grant.update(outcome="invalid_grant", answered=time.time())
                state["grants"].append(grant)
                return self.reply(400, {"error": "invalid_grant", "error_description": problem, "error_codes": [int(problem[6:problem.index(":")])]})
            response = self.issue(form["client_id"], form.get("scope", ""), record["username"], tenant, form.get("client_info") == "1",
                                   nonce=record.get("nonce"), request_claims=form.get("claims"))
            grant.update(outcome="ok", issued=response["refresh_token"], answered=time.time())
            state["grants"].append(grant)
        self.reply(200, response)

    def device_authorization(self, form):
        host = "%s://%s:%d" % (self.server.scheme, self.server.server_address[0], self.server.server_port)
        with lock:
            state["counter"] += 1
            n = state["counter"]
            user_code = "UC%04d" % n
            state["device_codes"]["devicecode-%d" % n] = {
                "user_code": user_code, "client_id": form.get("client_id"), "scope": form.get("scope", ""), "status": "pending",
                "claims": form.get("claims")}
            state["device_authorizations"].append({"client_id": form.get("client_id"), "claims": form.get("claims")})
            message = state["device_message"] or "To sign in, use a web browser to open the page %s/device and enter the code %s to authenticate." % (host, user_code)
            self.reply(200, {"device_code": "devicecode-%d" % n, "user_code": user_code, "verification_uri": host + "/device",
                             "expires_in": state["device_expires_in"], "interval": state["device_interval"], "message": message})

    def redeem_device_code(self, form, tenant):
        with lock:
            record = state["device_codes"].get(form.get("device_code"))
            if record is None:
                outcome = "invalid_grant"
            elif record["status"] == "expired":
                outcome = "expired_token"
            elif record["status"] == "denied":
                outcome = "access_denied"
            elif state["device_slow_down"] > 0:
                state["device_slow_down"] -= 1
                outcome = "slow_down"
            elif record["status"] == "pending":
                outcome = "authorization_pending"
            else:
                outcome = "ok"
            state["device_polls"].append({"outcome": outcome, "at": time.time(), "client_id": form.get("client_id"), "claims": form.get("claims")})
            if outcome != "ok":
                return self.reply(400, {"error": outcome, "error_description": "device code: " + outcome})
            del state["device_codes"][form["device_code"]]  # single use
            user = state["sign_in_user"] or {}
            # The scopes of the device authorization request (RFC 8628's token request carries none).
            response = self.issue(form["client_id"], form.get("scope") or record["scope"], user.get("username", "user@example.com"), tenant,
                                  form.get("client_info") == "1", request_claims=form.get("claims"))
        self.reply(200, response)


class TLSServer(ThreadingHTTPServer):
    """TLS with the handshake in each connection's own thread, so a client that stalls or
    aborts its handshake (an untrusted certificate) never holds up the accept loop."""
    context = None

    def get_request(self):
        connection, address = self.socket.accept()
        return self.context.wrap_socket(connection, server_side=True, do_handshake_on_connect=False), address


def serve(scheme, context=None, host="127.0.0.1", port=0):
    server = (TLSServer if context else ThreadingHTTPServer)((host, port), Handler)
    server.scheme = scheme
    server.context = context
    server.named_host = port != 0  # on a fixed port it plays a named host (discovery answers with the Host header)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


arguments = sys.argv[1:]
bind, https_port, unserved_log = "127.0.0.1", 0, None
while arguments[:1] in (["--bind"], ["--https-port"], ["--log"]):
    if arguments[0] == "--bind":
        bind = arguments[1]
    elif arguments[0] == "--https-port":
        https_port = int(arguments[1])
    else:
        unserved_log = arguments[1]
    arguments = arguments[2:]
servers = [serve("http", host=bind)]
if len(arguments) == 3 and arguments[0] == "--https":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(arguments[1], arguments[2])
    servers.append(serve("https", context, port=https_port))
for server in servers:
    print(server.server_port, flush=True)
sys.stdin.read()  # serve until the test closes stdin
for server in servers:
    server.shutdown()
