"""Drives the real MSAL Python (1.39) for the interop tests.

Reads one JSON request on stdin and writes one JSON answer on stdout:
  {"op": "add", "events": [{"client_id", "scope": [...], "token_endpoint", "response", "now"}]}
      -> {"cache": <MSAL Python's serialized cache as an object>}
  {"op": "search", "cache": <serialized cache object>, "queries": [{"credential_type", "target", "query", "now"}]}
      -> {"results": [[entry, ...], ...]}
Against a live authority (the loopback fake IdP's TLS port; "ca_bundle" is its certificate):
  {"op": "silent", "cache", "authority", "ca_bundle", "client_id", "username", "scopes"}
      -> acquire_token_silent(force_refresh=True; "force_refresh": false looks in the cache first) for
         the account with that username:
         {"accounts": [username, ...], "account_records": [{"username", "home_account_id", "realm"}, ...],
          "result": {...}, "cache": <serialized cache object>} (account_records: the Account entries
         MSAL Python's cache holds before the call, one per account and realm)
      with "client_capabilities": [...] the app declares them (MSAL's client_capabilities) and with
      "claims_challenge": JSON the call passes it (claims_challenge=); "claims" of a refusal is answered
  {"op": "redeem", "authority", "ca_bundle", "client_id", "refresh_token", "scopes"}
      -> acquire_token_by_refresh_token on an empty cache: {"result": {...}, "cache": ...}
  {"op": "device", "authority", "ca_bundle", "client_id", "scopes", "control"}
      -> MSAL Python's device code sign-in on an empty cache; the user code is approved through
         the fake IdP's control URL, as the user would enter it: {"result": {...}, "cache": ...}
"""
import json
import sys

import msal
import requests


def app(request, cache):
    session = requests.Session()
    # Trust the throw-away certificate, and only it. Without trust_env=False, REQUESTS_CA_BUNDLE
    # or CURL_CA_BUNDLE in the environment would override session.verify (and proxy variables
    # would apply to loopback).
    session.trust_env = False
    session.verify = request["ca_bundle"]
    # A non-Microsoft host: no instance discovery; tenant discovery at <authority>/v2.0/.well-known/...
    return msal.PublicClientApplication(request["client_id"], authority=request["authority"], token_cache=cache,
                                        http_client=session, instance_discovery=False,
                                        client_capabilities=request.get("client_capabilities"))


def outcome(result):
    keys = ("access_token", "refresh_token", "error", "error_description", "token_source", "claims")
    return {k: result[k] for k in keys if k in (result or {})}

request = json.load(sys.stdin)
cache = msal.SerializableTokenCache()
if request["op"] == "add":
    for event in request["events"]:
        now = event.pop("now")
        cache.add(event, now=now)
    print(json.dumps({"cache": json.loads(cache.serialize()), "version": msal.__version__}))
elif request["op"] == "search":
    cache.deserialize(json.dumps(request["cache"]))
    results = []
    for q in request["queries"]:
        results.append(list(cache.search(q["credential_type"], target=q.get("target"), query=q.get("query"), now=q.get("now"))))
    print(json.dumps({"results": results}))
elif request["op"] == "silent":
    cache.deserialize(json.dumps(request["cache"]))
    client = app(request, cache)
    accounts = client.get_accounts()
    records = [{k: a.get(k) for k in ("username", "home_account_id", "realm")}
               for a in cache.search(msal.TokenCache.CredentialType.ACCOUNT)]
    account = next(a for a in accounts if a["username"] == request["username"])
    result = client.acquire_token_silent(request["scopes"], account, force_refresh=request.get("force_refresh", True),
                                         claims_challenge=request.get("claims_challenge"))
    print(json.dumps({"accounts": [a["username"] for a in accounts], "account_records": records, "result": outcome(result),
                      "cache": json.loads(cache.serialize())}))
elif request["op"] == "redeem":
    client = app(request, cache)
    result = client.acquire_token_by_refresh_token(request["refresh_token"], request["scopes"])
    print(json.dumps({"result": outcome(result), "cache": json.loads(cache.serialize())}))
elif request["op"] == "device":
    client = app(request, cache)
    flow = client.initiate_device_flow(request["scopes"])
    requests.post(request["control"], json={"approve_device": flow["user_code"]}).raise_for_status()
    result = client.acquire_token_by_device_flow(flow)
    print(json.dumps({"result": outcome(result), "cache": json.loads(cache.serialize())}))
else:
    sys.exit("unknown op")
