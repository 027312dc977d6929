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
  time_silent N runs of acquire_token_silent after one warm-up, in this one process
              ({"seconds": [...], "token_source": ...}); "broker": false makes the same app without the broker
"broker": false makes the app without the broker (its own cache only).
"""
import json
import sys
import time

import msal


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
        first = app.acquire_token_silent(scopes, found)
        seconds = []
        for _ in range(request.get("runs", 20)):
            start = time.perf_counter()
            result = app.acquire_token_silent(scopes, found)
            seconds.append(time.perf_counter() - start)
            assert result and "access_token" in result, result
        answer = {"seconds": seconds, "token_source": first and first.get("token_source")}
    else:
        raise SystemExit("unknown action " + action)
    if cache.has_state_changed:
        with open(request["cache"], "w") as file:
            file.write(cache.serialize())
    print(json.dumps(answer))


main()
