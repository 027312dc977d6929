#!/usr/bin/env python3
"""Regenerates the python-*.json caches of this corpus with the real MSAL Python
(1.39) and msal-extensions (1.3), from fake token responses: no network.

    /work/main/.venv/bin/python make_msal_python_caches.py [OUTDIR]

Every value is fixed (clock, id_token claims), so the output is reproducible
for one MSAL Python version; a newer MSAL may add fields, which is the point of
regenerating.

  python-public-client.json    two user sign-ins (AAD tenant + FOCI app, and a
                               second account through /organizations with an
                               ssh-cert key_id, refresh_in and ext_expires_in)
  python-client-credentials.json
                               app-only tokens (no client_info, no id_token):
                               home_account_id is null, an FMI-path token
                               carries ext_cache_key
  python-adfs.json             an ADFS sign-in (id_token without client_info:
                               home_account_id is the `sub`, realm "adfs")

msal-extensions' PersistedTokenCache over FilePersistence writes exactly
SerializableTokenCache.serialize(); the script checks that its file equals
python-public-client.json byte for byte instead of storing a duplicate.
"""
import base64
import json
import os
import sys
import tempfile

import msal
from msal.token_cache import SerializableTokenCache

NOW = 1700000000  # fixed clock: cached_at / expires_on are derived from it


def b64(obj):
    return base64.b64encode(json.dumps(obj).encode()).decode()


def id_token(**claims):
    """An unsigned JWT; MSAL Python only decodes the claims."""
    body = {"iss": "https://login.microsoftonline.com/%s/v2.0" % claims.get("tid", "adfs"),
            "iat": NOW, "nbf": NOW, "exp": NOW + 3600}
    body.update(claims)
    return "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.%s.sig" % base64.urlsafe_b64encode(
        json.dumps(body).encode()).decode().rstrip("=")


def response(uid=None, utid=None, **kw):
    r = {}
    if uid and utid:
        r["client_info"] = b64({"uid": uid, "utid": utid})
    if "access_token" in kw:
        r.setdefault("token_type", "Bearer")
        r.setdefault("expires_in", 3599)
    r.update(kw)
    return r


def public_client(cache):
    tid = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    azcli = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
    cache.add({
        "client_id": azcli,
        "scope": ["https://management.core.windows.net//user_impersonation",
                  "offline_access", "openid", "profile"],
        "token_endpoint": "https://login.microsoftonline.com/%s/oauth2/v2.0/token" % tid,
        "environment": "login.microsoftonline.com",
        "grant_type": "authorization_code",
        "response": response(
            uid="6eeda3a1-c3b9-4e92-a94d-965a50c06de7", utid=tid,
            access_token="at-secret-alice", refresh_token="rt-secret-alice", foci="1",
            id_token=id_token(aud=azcli, tid=tid, oid="6eeda3a1-c3b9-4e92-a94d-965a50c06de7",
                              sub="alice-sub", preferred_username="alice@contoso.com",
                              name="Alice")),
    }, now=NOW)
    cache.add({
        "client_id": azcli,
        "scope": ["https://pas.windows.net/CheckMyAccess/Linux/.default"],
        "token_endpoint": "https://login.microsoftonline.com/organizations/oauth2/v2.0/token",
        "environment": "login.microsoftonline.com",
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "data": {"token_type": "ssh-cert", "key_id": "ssh-key-1"},
        "response": response(
            uid="b3c2a1d0-0000-4000-8000-000000000002",
            utid="9188040d-6c67-4c5b-b112-36a304b66dad",
            access_token="ssh-cert-secret-bob", token_type="ssh-cert",
            expires_in="3600", ext_expires_in="7200", refresh_in=1800,
            refresh_token="rt-secret-bob",
            id_token=id_token(aud=azcli, tid="9188040d-6c67-4c5b-b112-36a304b66dad",
                              oid="00000000-0000-0000-40c0-3bac188d01d1",
                              sub="bob-sub", preferred_username="bob@outlook.com")),
    }, now=NOW + 5)


def client_credentials(cache):
    tid = "f645ad92-e38d-4d1a-b510-d1b09a74a8ca"
    app = "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d"
    endpoint = "https://login.microsoftonline.com/%s/oauth2/v2.0/token" % tid
    cache.add({
        "client_id": app, "scope": ["https://graph.microsoft.com/.default"],
        "token_endpoint": endpoint, "environment": "login.microsoftonline.com",
        "grant_type": "client_credentials",
        "data": {"client_secret": "never-stored"},
        "response": response(access_token="app-only-at", expires_in=3599, ext_expires_in=3599),
    }, now=NOW)
    cache.add({
        "client_id": app, "scope": ["api://AzureFMITokenExchange/.default"],
        "token_endpoint": endpoint, "environment": "login.microsoftonline.com",
        "grant_type": "client_credentials",
        "data": {"fmi_path": "SomeFmiPath/FmiCredentialPath"},
        "response": response(access_token="fmi-at", expires_in=3599),
    }, now=NOW)


def adfs(cache):
    client = "PublicClientId"
    cache.add({
        "client_id": client, "scope": ["openid", "profile", "offline_access"],
        "token_endpoint": "https://fs.msidlab8.com/adfs/oauth2/token",
        "environment": "fs.msidlab8.com",
        "grant_type": "password", "data": {"username": "idlab@msidlab8.com"},
        "response": response(
            access_token="adfs-at", refresh_token="adfs-rt",
            id_token=id_token(aud=client, sub="unZYjm1NugFLhP1l338bxhRYyHbtCYOWX1P+F2fCsiQ=",
                              upn="idlab@msidlab8.com", iss="https://fs.msidlab8.com/adfs")),
    }, now=NOW)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    assert msal.__version__.startswith("1."), msal.__version__
    for name, fill in [("python-public-client.json", public_client),
                       ("python-client-credentials.json", client_credentials),
                       ("python-adfs.json", adfs)]:
        cache = SerializableTokenCache()
        fill(cache)
        with open(os.path.join(out, name), "w") as f:
            f.write(cache.serialize())  # exactly what apps persist

    # msal-extensions: let PersistedTokenCache write its own file.
    from msal_extensions import FilePersistence, PersistedTokenCache
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cache.bin")
        cache = PersistedTokenCache(FilePersistence(path))
        public_client(cache)
        with open(path, "rb") as a, open(os.path.join(out, "python-public-client.json"), "rb") as b:
            assert a.read() == b.read(), "msal-extensions wrote something else"
    print("msal", msal.__version__, "->", out)


if __name__ == "__main__":
    main()
