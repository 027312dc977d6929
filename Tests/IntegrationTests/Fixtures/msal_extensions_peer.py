"""A peer that reads and writes an external MSAL cache exactly as msal-extensions-based tools do.

Run it with the project venv, which has the real msal 1.39 and msal-extensions 1.3.1 (and, through
--system-site-packages, Debian's PyGObject for LibsecretPersistence):
    .venv/bin/python Tests/IntegrationTests/Fixtures/msal_extensions_peer.py STORE COMMAND ...

STORE (one of):
  --file PATH                       msal_extensions.FilePersistence(PATH) (Azure CLI's default,
                                    azure-identity's unencrypted fallback)
  --libsecret SCHEMA [KEY=VALUE ...] --label LABEL --signal PATH [--collection NAME]
                                    msal_extensions.LibsecretPersistence(PATH, SCHEMA, {KEY: VALUE},
                                    label=LABEL[, collection=NAME]): the blob is one Secret Service
                                    item; PATH is the signal file whose mtime says "changed"
  --lock PATH                       lock file; default <persistence location>.lockfile, which is
                                    what PersistedTokenCache uses

COMMAND:
  info                 which CrossPlatLock implementation msal-extensions picked, versions, paths
  write SEED.json      add one token response through PersistedTokenCache.add (msal's own add(),
                       each credential under the lock). SEED: {"client_id", "authority",
                       "response", optional "scope": [...], "now", "grant_type"}
  read                 the whole blob as JSON (secrets redacted unless --show-secrets)
  list                 accounts and tokens, summarised (secrets redacted unless --show-secrets)
  add-field NAME JSON  under the lock: load the blob, set a top-level field, save it back
  hammer N [--tag T]   N read-modify-write updates, each adding one distinct AccessToken
                       (target "api://peer-hammer/T-i") through PersistedTokenCache.add under the lock
  hold-lock SECONDS    take the CrossPlatLock, print {"locked": ..., "at": UNIX TIME} and sleep, then release
  silent --client ID --authority URL --ca-bundle PEM --username U --scopes "S ..."
                       what the owning tool does next time: msal.PublicClientApplication on the
                       PersistedTokenCache, acquire_token_silent_with_error(force_refresh=True)
                       for the account at the (loopback TLS) authority; prints the outcome

Every command prints one JSON object on stdout. Exit 0 on success, 1 on an error (message on
stderr and as {"error": ...} on stdout), 2 on bad arguments.
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import time

import msal
import msal_extensions
from msal_extensions import token_cache as _mx_token_cache
from msal_extensions.persistence import PersistenceNotFound

SECRET_FIELDS = ("secret",)


def b64url(obj):
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def default_seed(client_id="04b07795-8ddb-461a-bbee-02f9e1bf7b46", tenant="72f988bf-86f1-41af-91ab-2d7cd011db47",
                 uid="9f4880d8-80ba-4c40-97bc-f7a23c703084", username="peer@contoso.example"):
    """A synthetic, offline token response (MSAL never verifies the ID token; it only decodes it)."""
    now = int(time.time())
    claims = {"aud": client_id, "iss": "https://login.microsoftonline.com/%s/v2.0" % tenant, "iat": now,
              "nbf": now, "exp": now + 3600, "oid": uid, "sub": "peer-sub", "tid": tenant,
              "preferred_username": username, "name": "Peer User", "ver": "2.0"}
    id_token = "%s.%s." % (b64url({"alg": "none", "typ": "JWT"}), b64url(claims))
    return {
        "client_id": client_id,
        "authority": "https://login.microsoftonline.com/%s" % tenant,
        "scope": ["https://management.core.windows.net//user_impersonation"],
        "response": {
            "token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600,
            "scope": "https://management.core.windows.net//user_impersonation",
            "access_token": "peer-at-%d" % now, "refresh_token": "peer-rt-%d" % now,
            "id_token": id_token, "client_info": b64url({"uid": uid, "utid": tenant}), "foci": "1",
        },
    }


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    store = p.add_mutually_exclusive_group(required=True)
    store.add_argument("--file", metavar="PATH")
    store.add_argument("--libsecret", nargs="+", metavar="SCHEMA_OR_KEY=VALUE",
                       help="schema name followed by KEY=VALUE attributes")
    p.add_argument("--label", default="")
    p.add_argument("--signal", metavar="PATH")
    p.add_argument("--collection", default=None,
                   help="Secret Service collection alias/path; default None = libsecret's default")
    p.add_argument("--lock", metavar="PATH")
    p.add_argument("--show-secrets", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("info")
    w = sub.add_parser("write")
    w.add_argument("seed", nargs="?", help="seed JSON file; omitted = a built-in synthetic response")
    sub.add_parser("read")
    sub.add_parser("list")
    a = sub.add_parser("add-field")
    a.add_argument("name")
    a.add_argument("value", help="a JSON value")
    h = sub.add_parser("hammer")
    h.add_argument("n", type=int)
    h.add_argument("--tag", default=str(os.getpid()))
    h.add_argument("--seed")
    hl = sub.add_parser("hold-lock")
    hl.add_argument("seconds", type=float)
    sl = sub.add_parser("silent")
    for name in ("--client", "--authority", "--ca-bundle", "--username", "--scopes"):
        sl.add_argument(name, required=True)
    args = p.parse_args(argv)
    if args.libsecret and not args.signal:
        p.error("--libsecret needs --signal PATH (the signal file LibsecretPersistence touches)")
    return args


def build_persistence(args):
    if args.file:
        return msal_extensions.FilePersistence(args.file)
    schema, attrs = args.libsecret[0], {}
    for kv in args.libsecret[1:]:
        if "=" not in kv:
            raise SystemExit("attribute %r is not KEY=VALUE" % kv)
        k, v = kv.split("=", 1)
        attrs[k] = v
    kwargs = {"label": args.label}
    if args.collection is not None:
        kwargs["collection"] = args.collection
    # LibsecretPersistence runs libsecret.trial_run() (store, look up, clear a "Test Schema" item)
    # before anything else, exactly as in the tools.
    return msal_extensions.LibsecretPersistence(args.signal, schema_name=schema, attributes=attrs, **kwargs)


def lock_path(args, persistence):
    return os.path.expanduser(args.lock) if args.lock else persistence.get_location() + ".lockfile"


def redact(obj, show):
    if show:
        return obj
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in SECRET_FIELDS and isinstance(v, str):
                out[k] = "<redacted len=%d sha256=%s>" % (len(v), hashlib.sha256(v.encode()).hexdigest()[:12])
            else:
                out[k] = redact(v, show)
        return out
    if isinstance(obj, list):
        return [redact(x, show) for x in obj]
    return obj


def load_blob(persistence):
    try:
        text = persistence.load()
    except PersistenceNotFound:
        return None
    return json.loads(text) if text else {}


def event_from_seed(seed, scope=None):
    authority = seed["authority"].rstrip("/")
    event = {
        "client_id": seed["client_id"],
        "scope": scope if scope is not None else seed.get("scope", []),
        "token_endpoint": authority + "/oauth2/v2.0/token",
        "response": dict(seed["response"]),
        "grant_type": seed.get("grant_type", "authorization_code"),
    }
    return event


def cmd_info(args, persistence, lock):
    impl = _mx_token_cache.CrossPlatLock.__module__
    return {"msal": msal.__version__, "msal_extensions": msal_extensions.__version__,
            "cross_plat_lock": impl,  # msal_extensions.cache_lock = portalocker (flock); .filelock = O_EXCL only
            "persistence": type(persistence).__name__, "location": persistence.get_location(),
            "lock": lock, "is_encrypted": persistence.is_encrypted}


def cmd_write(args, persistence, lock):
    seed = json.load(open(args.seed)) if args.seed else default_seed()
    cache = msal_extensions.PersistedTokenCache(persistence, lock_location=lock)
    now = seed.get("now")
    cache.add(event_from_seed(seed), **({"now": now} if now is not None else {}))
    return {"written": True, "access_tokens": len(json.loads(cache.serialize()).get("AccessToken", {}))}


def cmd_read(args, persistence, lock):
    blob = load_blob(persistence)
    return {"found": blob is not None, "blob": redact(blob, args.show_secrets)}


def cmd_list(args, persistence, lock):
    blob = load_blob(persistence) or {}
    def entries(kind):
        return list((blob.get(kind) or {}).values())
    accounts = [{k: a.get(k) for k in ("home_account_id", "environment", "realm", "username", "authority_type")}
                for a in entries("Account")]
    tokens = []
    for kind in ("AccessToken", "RefreshToken", "IdToken"):
        for e in entries(kind):
            t = {k: e.get(k) for k in ("credential_type", "home_account_id", "environment", "client_id",
                                       "realm", "target", "family_id", "expires_on") if k in e}
            t["secret"] = e.get("secret")
            tokens.append(redact(t, args.show_secrets))
    known = {"Account", "AccessToken", "RefreshToken", "IdToken", "AppMetadata"}
    return {"accounts": accounts, "tokens": tokens,
            "counts": {k: len(blob.get(k) or {}) for k in sorted(known)},
            "unknown_top_level_fields": sorted(k for k in blob if k not in known)}


def cmd_add_field(args, persistence, lock):
    value = json.loads(args.value)
    # The same lock and persistence a PersistedTokenCache.modify() uses; the blob is kept as parsed
    # and written back with msal's own formatting (json.dumps(indent=4)).
    with msal_extensions.CrossPlatLock(lock):
        blob = load_blob(persistence) or {}
        blob[args.name] = value
        persistence.save(json.dumps(blob, indent=4))
    return {"added": args.name}


def cmd_hammer(args, persistence, lock):
    seed = json.load(open(args.seed)) if args.seed else default_seed()
    cache = msal_extensions.PersistedTokenCache(persistence, lock_location=lock)
    start = time.monotonic()
    for i in range(args.n):
        event = event_from_seed(seed, scope=["api://peer-hammer/%s-%d" % (args.tag, i)])
        event["response"]["access_token"] = "hammer-%s-%d" % (args.tag, i)
        event["response"].pop("scope", None)
        # Only the AccessToken (plus the Account and AppMetadata add() rewrites) changes per update;
        # a refresh token's key includes the target, so keeping it would add one RT per update too.
        event["response"].pop("refresh_token", None)
        cache.add(event)  # AT, Account, IdT, RT, AppMetadata: each a locked reload-modify-save
    return {"updates": args.n, "tag": args.tag, "seconds": round(time.monotonic() - start, 3)}


def cmd_hold_lock(args, persistence, lock):
    with msal_extensions.CrossPlatLock(lock):
        print(json.dumps({"locked": lock, "pid": os.getpid(), "at": time.time()}), flush=True)
        time.sleep(args.seconds)
    return {"released": lock}


def cmd_silent(args, persistence, lock):
    import requests
    cache = msal_extensions.PersistedTokenCache(persistence, lock_location=lock)
    session = requests.Session()
    session.trust_env = False  # only the throw-away certificate, no proxies for loopback
    session.verify = args.ca_bundle
    app = msal.PublicClientApplication(args.client, authority=args.authority, token_cache=cache,
                                       http_client=session, instance_discovery=False)
    accounts = app.get_accounts(username=args.username)
    if not accounts:
        return {"accounts": 0, "result": None}
    result = app.acquire_token_silent_with_error(args.scopes.split(), accounts[0], force_refresh=True) or {}
    keys = ("access_token", "error", "error_description", "token_source")
    return {"accounts": len(accounts), "result": {k: result[k] for k in keys if k in result}}


COMMANDS = {"info": cmd_info, "write": cmd_write, "read": cmd_read, "list": cmd_list,
            "add-field": cmd_add_field, "hammer": cmd_hammer, "hold-lock": cmd_hold_lock,
            "silent": cmd_silent}


def main(argv):
    args = parse_args(argv)
    try:
        persistence = build_persistence(args)
        lock = lock_path(args, persistence)
        result = COMMANDS[args.command](args, persistence, lock)
    except Exception as e:  # report what the peer saw, e.g. LockError after 5 s of a stale lock
        msg = "%s: %s" % (type(e).__name__, e)
        print(msg, file=sys.stderr)
        print(json.dumps({"error": msg, "type": type(e).__name__}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
