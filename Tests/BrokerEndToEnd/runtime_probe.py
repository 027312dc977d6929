"""Drives Microsoft's authentication runtime (pymsalruntime) directly against the stand-in broker
(Tests/TokenCacheTestIdentityProvider/Fixtures/stand_in_broker.py), for the wire-format case of
test_broker.py: each case writes the stand-in's replies, makes one runtime call and records what
the runtime returned.
  python runtime_probe.py REPLIES CLIENT_ID   (the stand-in owns the name and reads REPLIES on every call)
Prints {"<case>": {"token": ..., "expires_in": ..., "scopes": [...], "status": "Status_X", "context": ...}}.
"""
import base64
import json
import sys
import time
import uuid

import pymsalruntime as runtime

REPLIES, CLIENT = sys.argv[1], sys.argv[2]
TENANT = "72f988bf-0000-0000-0000-00000000b0b1"
UID = "c0c0c0c0-0000-0000-0000-000000000047"
NOW = int(time.time())


def b64(value):
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


ID_TOKEN = b64({"alg": "none", "typ": "JWT"}) + "." + b64({
    "aud": CLIENT, "iss": "https://login.microsoftonline.com/%s/v2.0" % TENANT, "oid": UID, "tid": TENANT, "sub": "s",
    "preferred_username": "carol@contoso.com", "name": "Carol", "iat": NOW, "exp": NOW + 3600}) + ".c2ln"
ACCOUNT = {"clientInfo": b64({"uid": UID, "utid": TENANT}), "environment": "login.microsoftonline.com", "givenName": "Carol",
           "homeAccountId": "%s.%s" % (UID, TENANT), "localAccountId": UID, "name": "Carol", "passwordExpiry": 0,
           "realm": TENANT, "username": "carol@contoso.com"}


def token_reply(**changes):
    """The documented token reply (docs/BROKER.md), with members changed or (None) removed."""
    reply = {"accessToken": "at-wire-format", "accessTokenType": 0, "account": ACCOUNT, "clientInfo": ACCOUNT["clientInfo"],
             "expiresOn": (NOW + 3600) * 1000, "extendedExpiresOn": (NOW + 3600) * 1000, "grantedScopes": "User.Read",
             "idToken": ID_TOKEN}
    for key, value in changes.items():
        if value is None:
            reply.pop(key)
        else:
            reply[key] = value
    return {"brokerTokenResponse": reply}


def error_reply(status, **members):
    return {"error": dict({"status": status, "errorCode": 0, "tag": 0, "context": "probe"}, **members)}


def call(function, *arguments):
    done = runtime.CallbackData()
    function(*arguments, lambda result, done=done: done.complete(result))
    done.signal.wait()
    return done.result


def parameters(scopes=("User.Read",)):
    made = runtime.MSALRuntimeAuthParameters(CLIENT, "https://login.microsoftonline.com/" + TENANT)
    made.set_redirect_uri("https://login.microsoftonline.com/common/oauth2/nativeclient")
    made.set_requested_scopes(list(scopes))
    return made


def outcome(result):
    error = result.get_error()
    if error:
        return {"status": str(error.get_status()).rsplit(".", 1)[-1], "context": error.get_context(),
                "error_code": error.get_error_code()}
    return {"token": result.get_access_token(), "expires_in": result.get_access_token_expiry_time() - int(time.time()),
            "scopes": result.get_granted_scopes(), "account": result.get_account().get_account_id() if result.get_account() else None}


def sign_in(silently_reply, scopes=("User.Read",), accounts=None):
    with open(REPLIES, "w") as file:
        json.dump({"getAccounts": {"accounts": [ACCOUNT] if accounts is None else accounts}, "acquireTokenSilently": silently_reply}, file)
    return outcome(call(runtime.signin_silently, parameters(scopes), str(uuid.uuid4())))


results = {"documented": sign_in(token_reply())}
for member in ("accessTokenType", "expiresOn", "extendedExpiresOn", "clientInfo", "idToken"):
    results["without " + member] = sign_in(token_reply(**{member: None}))
for member in ("account", "grantedScopes"):
    results["without " + member] = sign_in(token_reply(**{member: None}))
results["expiresOn in seconds"] = sign_in(token_reply(expiresOn=NOW + 3600))
results["declined scope"] = sign_in(token_reply(grantedScopes="User.Read"), scopes=("Mail.Read",))
results["granted superset"] = sign_in(token_reply(grantedScopes="Mail.Read User.Read"), scopes=("Mail.Read",))
for status in (2, 9, 13, 19, 22):
    results["status %d" % status] = sign_in(error_reply(status, errorCode=47))
results["error without tag"] = sign_in({"error": {"status": 2, "errorCode": 0, "context": "probe"}})
results["error without errorCode"] = sign_in({"error": {"status": 2, "tag": 1, "context": "probe"}})
results["error with extra members"] = sign_in(error_reply(9, protocolError="", tokencacheCode="policy"))
# The runtime's own cache: after a reply with an hour left, a silent call is answered without the broker.
sign_in(token_reply(accessToken="at-cached-by-runtime"))
with open(REPLIES, "w") as file:
    json.dump({"getAccounts": {"accounts": [ACCOUNT]}, "acquireTokenSilently": error_reply(0)}, file)
account = call(runtime.read_account_by_id, UID, str(uuid.uuid4())).get_account()
results["silent from the runtime's cache"] = outcome(call(runtime.acquire_token_silently, parameters(), str(uuid.uuid4()), account))
print(json.dumps(results))
