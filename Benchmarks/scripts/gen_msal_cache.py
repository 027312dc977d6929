"""Generates an MSAL unified JSON cache with N accounts x 3 clients, written by MSAL Python itself.

Each (account, client) pair is one token endpoint response fed to `msal.SerializableTokenCache.add`,
so the entries (AccessToken, RefreshToken, IdToken, Account, AppMetadata) are exactly what MSAL
Python stores. Token sizes are realistic: a 1,500-byte access token (a JWT's usual size), an
800-byte refresh token, and an ID token carrying the usual claims.

    gen_msal_cache.py --accounts N [--first K] > cache.json
    gen_msal_cache.py --responses K --first I [--distinct] [--client C] > responses.json

--responses prints a JSON array of K token endpoint responses for the same save benchmarks on both
sides: by default K refreshes of account I (new access and refresh token each time, as a refresh
with a rotating refresh token returns), with --distinct first sign-ins of accounts I..I+K-1.
"""
import argparse
import base64
import json
import sys
import time

TENANT = "11111111-1111-1111-1111-111111111111"
CLIENTS = ["aaaaaaaa-0000-0000-0000-000000000001", "aaaaaaaa-0000-0000-0000-000000000002",
           "aaaaaaaa-0000-0000-0000-000000000003"]
AUTHORITY = "https://login.microsoftonline.com/" + TENANT
SCOPES = ["User.Read"]


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()


def uid_of(index):
    return "%08x-0000-0000-0000-000000000000" % index


def username(index):
    return "user%d@contoso.com" % index


def response(index, client, now=None, variant=0):
    now = int(now or time.time())
    uid = uid_of(index)
    claims = {"aud": client, "iss": "https://login.microsoftonline.com/%s/v2.0" % TENANT, "iat": now,
              "nbf": now, "exp": now + 3600, "name": "User %d" % index, "oid": uid, "sub": uid,
              "preferred_username": username(index), "tid": TENANT, "ver": "2.0"}
    # An access token of a JWT's usual size, distinct per account and client.
    at_body = b64({"aud": "00000003-0000-0000-c000-000000000000", "oid": uid, "appid": client, "scp": "User.Read",
                   "tid": TENANT, "iat": now, "exp": now + 3600, "uti": "v%d" % variant})
    access_token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + at_body + "." + ("s" * max(0, 1500 - 38 - len(at_body)))
    return {
        "token_type": "Bearer", "scope": " ".join(SCOPES) + " openid profile offline_access",
        "expires_in": 3600, "ext_expires_in": 3600,
        "access_token": access_token,
        "refresh_token": "0.A" + ("r%d-%s-v%d-" % (index, client[-1], variant)) + "R" * 780,
        "id_token": b64({"typ": "JWT", "alg": "RS256"}) + "." + b64(claims) + "." + "i" * 342,
        "client_info": b64({"uid": uid, "utid": TENANT}),
        "foci": "1",
    }


def event(index, client, now=None):
    return {"client_id": client, "scope": SCOPES, "response": response(index, client, now),
            "token_endpoint": AUTHORITY + "/oauth2/v2.0/token"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accounts", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first account")
    parser.add_argument("--responses", type=int, default=None, metavar="K")
    parser.add_argument("--distinct", action="store_true")
    parser.add_argument("--client", default=CLIENTS[0])
    args = parser.parse_args()
    if args.responses is not None:
        json.dump([response(args.first + k, args.client) if args.distinct else response(args.first, args.client, variant=k + 1)
                   for k in range(args.responses)], sys.stdout)
        return
    import msal
    cache = msal.SerializableTokenCache()
    for index in range(args.first, args.first + args.accounts):
        for client in CLIENTS:
            cache.add(event(index, client))
    sys.stdout.write(cache.serialize())


if __name__ == "__main__":
    main()
