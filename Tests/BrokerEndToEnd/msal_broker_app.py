"""A broker-enabled MSAL Python app (msal 1.39 with pymsalruntime, `enable_broker_on_linux=True`),
one action per run, its own MSAL token cache kept in a file between runs as an app keeps it:
  python3 msal_broker_app.py '{"client": ID, "authority": URL, "cache": FILE, "action": A, ...}'
Actions (the answer is one JSON object on stdout):
  sign_in     acquire_token_interactive(scopes, parent_window_handle=CONSOLE_WINDOW_HANDLE, prompt="none"):
              the broker's silent sign-in, no UI ({"result": MSAL's result without tokens' values
              except "access_token"})
  accounts    get_accounts() ({"accounts": [{"username", "home_account_id", "local_account_id", "account_source"}]})
  silent      acquire_token_silent(scopes, the account named "username") ({"result": ...} or {"result": null})
  remove      remove_account(the account named "username") ({"removed": true})
  time_silent "runs" timed calls of acquire_token_silent in this one process ({"seconds": [...]}), each
              asserted to return a token from "expect_source" ("broker" or "cache"); with "drop_cached": true,
              before each call (untimed) the access tokens are dropped from the app's cache and from the
              runtime's own (its Secret Service items), so each token comes from the broker
  drop_runtime_tokens  drops the runtime's cached access tokens only ({"dropped": n})
"broker": false makes the app without the broker (its own cache only).
"""
import json
import sys
import time

import msal


def drop_runtime_access_tokens():
    """Deletes the access tokens MSALRuntime keeps in the Secret Service (schema com.microsoft.identity.secret,
    one item per client and account whose secret is base64 JSON keyed by scopes): the account stays."""
    import base64
    import gi
    gi.require_version("Secret", "1")
    from gi.repository import Secret
    service = Secret.Service.get_sync(Secret.ServiceFlags.OPEN_SESSION | Secret.ServiceFlags.LOAD_COLLECTIONS)
    dropped = 0
    for item in service.search_sync(None, {"xdg:schema": "com.microsoft.identity.secret"},
                                    Secret.SearchFlags.ALL | Secret.SearchFlags.UNLOCK | Secret.SearchFlags.LOAD_SECRETS):
        text = item.get_secret().get_text() or ""
        try:
            value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        except ValueError:
            continue
        if any(isinstance(entry, dict) and entry.get("credential_type") == "AccessToken" for entry in value.values()):
            item.delete_sync(None)
            dropped += 1
    return dropped


def main():
    request = json.loads(sys.argv[1])
    cache = msal.SerializableTokenCache()
    try:
        with open(request["cache"]) as file:
            cache.deserialize(file.read())
    except FileNotFoundError:
        pass
    app = msal.PublicClientApplication(request["client"], authority=request["authority"], token_cache=cache,
                                       enable_broker_on_linux=request.get("broker", True))
    if request.get("broker", True) and not app._enable_broker:
        # MSAL falls back to its own flows (a browser) when the broker is absent: a test must not.
        raise SystemExit("MSAL Python did not enable the broker (is com.microsoft.identity.broker1 owned?)")
    scopes = request.get("scopes", ["User.Read"])
    action = request["action"]

    def account():
        found = [a for a in app.get_accounts() if a["username"].lower() == request["username"].lower()]
        return found[0] if found else None

    def summary(result):
        if result is None:
            return None
        keep = ("access_token", "token_type", "scope", "error", "error_description", "token_source", "expires_in",
                "_broker_status", "_broker_error_code")
        return {k: v for k, v in result.items() if k in keep}

    if action == "sign_in":
        answer = {"result": summary(app.acquire_token_interactive(
            scopes, parent_window_handle=app.CONSOLE_WINDOW_HANDLE, prompt="none"))}
    elif action == "accounts":
        answer = {"accounts": [{k: a.get(k) for k in ("username", "home_account_id", "local_account_id", "account_source")}
                               for a in app.get_accounts()]}
    elif action == "silent":
        found = account()
        answer = {"result": summary(app.acquire_token_silent(scopes, found, force_refresh=request.get("force_refresh", False)))
                  if found else None, "account_found": found is not None}
    elif action == "remove":
        app.remove_account(account())
        answer = {"removed": True}
    elif action == "time_silent":
        found = account()
        seconds = []
        for _ in range(request.get("runs", 20)):
            if request.get("drop_cached"):
                for at in list(cache.search(msal.TokenCache.CredentialType.ACCESS_TOKEN)):
                    cache.remove_at(at)
                drop_runtime_access_tokens()
            start = time.perf_counter()
            result = app.acquire_token_silent(scopes, found)
            seconds.append(time.perf_counter() - start)
            assert result and result.get("token_source") == request["expect_source"], summary(result)
        answer = {"seconds": seconds}
    elif action == "drop_runtime_tokens":
        answer = {"dropped": drop_runtime_access_tokens()}
    else:
        raise SystemExit("unknown action " + action)
    if cache.has_state_changed:
        with open(request["cache"], "w") as file:
            file.write(cache.serialize())
    print(json.dumps(answer))


main()
