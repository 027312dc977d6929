"""The reference side of the benchmark: MSAL Python + msal-extensions on the Secret Service.

msal-extensions keeps the whole MSAL cache as one libsecret item (LibsecretPersistence) and wraps
it in PersistedTokenCache, which reloads it when it changed and saves it after every change; that
is how Azure CLI-style apps share a cache on Linux.

    msal_bench.py store CACHE.json            put an MSAL JSON cache into the persistence
    msal_bench.py lookup CLIENT USERNAME SCOPE  the cold lookup, run as a whole process:
        PublicClientApplication(token_cache=PersistedTokenCache(LibsecretPersistence(...))),
        get_accounts(username) + acquire_token_silent(scopes, account); prints the token
    msal_bench.py lookup-file PATH CLIENT USERNAME SCOPE
        the same lookup on a plaintext cache file (FilePersistence), as Azure CLI reads its
        ~/.azure/msal_token_cache.json
    msal_bench.py save RESPONSES.json CLIENT AUTHORITY
        PersistedTokenCache.add of each response in turn (what acquire_token_* does after a token
        request); prints JSON with per-save times in ns

MSAL Python fetches the authority's OpenID configuration when an app is created. There is no
network here, so an in-process HTTP client answers that request at once (and refuses any other):
in real use that request alone costs a network round trip per process, so these numbers flatter
MSAL Python.
"""
import json
import os
import sys
import time

import msal
from msal_extensions import FilePersistence, LibsecretPersistence, PersistedTokenCache

SCHEMA = "org.swift-tokencache.bench.msal"
SIGNAL = os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "msal-bench.signal")


def persistence():
    return LibsecretPersistence(SIGNAL, schema_name=SCHEMA, attributes={"cache": "msal-bench"})


class OfflineResponse:
    def __init__(self, body, status=200):
        self.status_code = status
        self.text = json.dumps(body)
        self.headers = {}

    def raise_for_status(self):
        if self.status_code >= 400:
            raise RuntimeError("HTTP %d" % self.status_code)


class OfflineHTTP:
    """Answers MSAL's metadata requests from memory; a token request would be a bug here."""

    def get(self, url, params=None, headers=None, **kwargs):
        if url.endswith("/.well-known/openid-configuration"):
            base = url[: -len("/v2.0/.well-known/openid-configuration")]
            return OfflineResponse({
                "authorization_endpoint": base + "/oauth2/v2.0/authorize",
                "token_endpoint": base + "/oauth2/v2.0/token",
                "device_authorization_endpoint": base + "/oauth2/v2.0/devicecode",
                "issuer": base + "/v2.0", "end_session_endpoint": base + "/oauth2/v2.0/logout",
            })
        if "discovery/instance" in url:
            return OfflineResponse({"tenant_discovery_endpoint": "", "metadata": [{
                "preferred_network": "login.microsoftonline.com", "preferred_cache": "login.windows.net",
                "aliases": ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"]}]})
        raise RuntimeError("unexpected request " + url)

    def post(self, url, params=None, data=None, headers=None, **kwargs):
        raise RuntimeError("unexpected token request " + url)

    def close(self):
        pass


def main():
    command = sys.argv[1]
    if command == "store":
        with open(sys.argv[2]) as handle:
            persistence().save(handle.read())
        print(json.dumps({"stored": True}))
    elif command in ("lookup", "lookup-file"):
        if command == "lookup-file":
            cache = PersistedTokenCache(FilePersistence(sys.argv[2]))
            del sys.argv[2]
        else:
            cache = PersistedTokenCache(persistence())
        client, username, scope = sys.argv[2:5]
        app = msal.PublicClientApplication(client, authority="https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111",
                                           token_cache=cache, http_client=OfflineHTTP())
        accounts = app.get_accounts(username=username)
        result = app.acquire_token_silent([scope], account=accounts[0]) if accounts else None
        if not result or "access_token" not in result:
            sys.exit("no token: %r" % (result,))
        print(result["access_token"])
    elif command == "save":
        path, client, authority = sys.argv[2:5]
        with open(path) as handle:
            responses = json.load(handle)
        cache = PersistedTokenCache(persistence())
        start = time.perf_counter_ns()
        accounts = len(cache.find(msal.TokenCache.CredentialType.ACCOUNT))  # the first load, timed apart
        first_load = time.perf_counter_ns() - start
        times = []
        for response in responses:
            start = time.perf_counter_ns()
            cache.add({"client_id": client, "scope": ["User.Read"], "response": response,
                       "token_endpoint": authority + "/oauth2/v2.0/token"})
            times.append(time.perf_counter_ns() - start)
        print(json.dumps({"command": "save", "accounts_before": accounts, "first_load_ns": first_load, "save_ns": times}))
    else:
        sys.exit("commands: store, lookup, lookup-file, save")


if __name__ == "__main__":
    main()
