"""The identity broker benchmark (#47): a broker-enabled MSAL Python app's silent token through
`tokencache broker`, against the same app's silent token from its own MSAL cache and against a cold
`tokencache token`. Started by scripts/bench-broker.sh inside scripts/with-broker-harness.sh (the local
identity provider at login.microsoftonline.com, a private bus with gnome-keyring, a temporary HOME),
with the release CLI; writes Benchmarks/results/BROKER.md and broker.json (smoke: results/smoke/).

Two views, both with the same user signed in with `tokencache login` and the broker serving its cache:
- per process, as a script sees it (hyperfine): `python app.py silent` through the broker (before each
  run, untimed: the app's MSAL cache holds the account but no access token, and the runtime's own cached
  access tokens are dropped, so the token comes over the bus from tokencache) / the same app with the
  broker off and the token in its own MSAL cache file / the broker-enabled app answered by its own cache
  (the runtime loaded but not asked) / `tokencache token`;
- per call, inside one app process (what a long-running app pays): acquire_token_silent through the
  broker (both caches emptied before each call, untimed) / from the app's own in-memory MSAL cache /
  the broker's share: acquireTokenSilently alone, sent with GDBus.
"""
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "BrokerEndToEnd"))
import test_broker as e2e  # noqa: E402  the harness's helpers: provider control, login, broker, app runs

SMOKE = os.environ.get("BENCH_SMOKE") == "1"
RESULTS = os.path.join(ROOT, "Benchmarks", "results", "smoke") if SMOKE else os.path.join(ROOT, "Benchmarks", "results")
RUNS = {"process": (15, 3), "call": (50, 5)}
APP = os.path.join(ROOT, "Tests", "BrokerEndToEnd", "msal_broker_app.py")


def runs(name):
    return RUNS[name][1 if SMOKE else 0]


def stats(seconds):
    values = sorted(seconds)
    return {"median_ms": statistics.median(values) * 1e3, "min_ms": values[0] * 1e3, "max_ms": values[-1] * 1e3,
            "runs": len(values)}


def app_argv(action, cache, **request):
    """The app (client APP_SAME) with its MSAL cache in CACHE (a file name in HOME)."""
    request = dict(request, client=e2e.APP_SAME, authority=e2e.AUTHORITY, action=action, cache=os.path.join(os.environ["HOME"], cache))
    return [e2e.PYTHON, APP, json.dumps(request)]


def app_json(argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def hyperfine(name, argv, prepare=None):
    out = os.path.join(os.environ["HOME"], "hyperfine.json")
    command = ["hyperfine", "--style", "none", "-N", "--runs", str(runs("process")), "--warmup", "1",
               "--export-json", out, "--command-name", name]
    if prepare:
        command += ["--prepare", shlex.join(prepare)]
    done = subprocess.run(command + [shlex.join(argv)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("hyperfine %s failed: %s %s" % (name, done.stdout[-2000:], done.stderr[-2000:]))
    with open(out) as file:
        return stats(json.load(file)["results"][0]["times"])


def bus_round_trips(cache, login_token):
    """acquireTokenSilently straight to the broker with GDBus, the request as the runtime sends it: the broker's share
    of a call through it (the rest is the runtime: its Secret Service cache reads and writes, JSON, threads)."""
    from gi.repository import Gio, GLib
    account = next(iter(cache["Account"].values()))
    request = json.dumps({"authParameters": {
        "accessTokenToRenew": "", "account": {"homeAccountId": account["home_account_id"], "username": account["username"],
                                              "localAccountId": account["local_account_id"], "realm": account["realm"],
                                              "environment": "login.microsoftonline.com"},
        "authority": e2e.AUTHORITY, "authorizationType": 1, "clientId": e2e.APP_SAME, "decodedClaims": "",
        "redirectUri": "https://login.microsoftonline.com/common/oauth2/nativeclient", "requestedScopes": ["User.Read"],
        "username": account["username"]}})
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    seconds = []
    for index in range(runs("call") + 1):
        start = time.perf_counter()
        reply = bus.call_sync(e2e.BROKER_NAME, "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1",
                              "acquireTokenSilently", GLib.Variant("(sss)", ("0.0", "00000000-0000-0000-0000-00000000b047", request)),
                              GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, 30000, None)
        elapsed = time.perf_counter() - start
        assert json.loads(reply.unpack()[0])["brokerTokenResponse"]["accessToken"] == login_token, "no token over the bus"
        if index:  # the first call connects and warms up
            seconds.append(elapsed)
    return stats(seconds)


def main():
    login_token = e2e.sign_in_with_tokencache_login()
    broker = e2e.Broker()
    try:
        user, home = e2e.USER["username"], os.environ["HOME"]
        first = app_json(app_argv("sign_in", "broker.json"))["result"]
        assert first.get("access_token") == login_token and first.get("token_source") == "broker", "no token through the broker"
        with open(os.path.join(home, "broker.json")) as file:
            with_token = json.load(file)
        with open(os.path.join(home, "no-access-token.json"), "w") as file:
            json.dump(dict(with_token, AccessToken={}), file)
        with open(os.path.join(home, "own.json"), "w") as file:  # the same app's cache, for its runs without the broker
            json.dump(with_token, file)

        # Before each broker run: the account but no access token in the app's cache, none in the runtime's.
        prepare = ["sh", "-c", "cp %s %s && %s" % (shlex.quote(os.path.join(home, "no-access-token.json")),
                                                  shlex.quote(os.path.join(home, "broker.json")),
                                                  shlex.join(app_argv("drop_runtime_tokens", "scratch.json")))]
        check = subprocess.run(prepare, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        answer = app_json(app_argv("silent", "broker.json", username=user))["result"]
        assert answer.get("token_source") == "broker" and answer.get("access_token") == login_token, "the prepared run did not use the broker"
        own = app_json(app_argv("silent", "own.json", username=user, broker=False))["result"]
        assert own.get("token_source") == "cache" and own.get("access_token") == login_token, "the app's own cache did not answer"
        cli = [e2e.CLI, "token", "--client", e2e.LOGIN_CLIENT, "--scopes", "User.Read", "--no-refresh"]
        assert subprocess.run(cli, capture_output=True, text=True).stdout.strip() == login_token

        process = {
            "msal_python_through_tokencache_broker": hyperfine("broker", app_argv("silent", "broker.json", username=user), prepare),
            "msal_python_own_cache": hyperfine("own cache", app_argv("silent", "own.json", username=user, broker=False)),
            # The broker-enabled app when its own cache answers: the runtime is loaded (WebKitGTK and all) but not asked.
            "msal_python_broker_enabled_own_cache": hyperfine("broker on, own cache", app_argv("silent", "own.json", username=user)),
            "tokencache_token_cold": hyperfine("tokencache token", cli),
        }
        call = {
            "msal_python_through_tokencache_broker": stats(app_json(app_argv(
                "time_silent", "broker.json", username=user, runs=runs("call"), drop_cached=True, expect_source="broker"))["seconds"]),
            "msal_python_own_cache": stats(app_json(app_argv(
                "time_silent", "own.json", username=user, runs=runs("call"), broker=False, expect_source="cache"))["seconds"]),
        }
        served = broker.text().count("acquireTokenSilently")
        # Every broker-path measurement reached the broker: sign-in, the check, hyperfine's warm-up and runs, the calls.
        assert served == 3 + runs("process") + runs("call"), "the broker served %d token requests" % served
        call["bus_round_trip_only"] = bus_round_trips(with_token, login_token)
    finally:
        broker.stop()
    broker_ms = process["msal_python_through_tokencache_broker"]["median_ms"]
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "smoke": SMOKE,
        "machine": {"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0], "kernel": platform.release()},
        "cli": os.path.relpath(e2e.CLI, ROOT), "process": process, "call": call, "broker_requests_served": served,
        "ratios": {
            "process_broker_over_own_cache": broker_ms / process["msal_python_own_cache"]["median_ms"],
            "process_broker_over_broker_enabled_own_cache": broker_ms / process["msal_python_broker_enabled_own_cache"]["median_ms"],
            "process_broker_over_tokencache_token": broker_ms / process["tokencache_token_cold"]["median_ms"],
            "call_broker_share": call["bus_round_trip_only"]["median_ms"] / call["msal_python_through_tokencache_broker"]["median_ms"],
            "call_broker_over_own_cache": call["msal_python_through_tokencache_broker"]["median_ms"]
            / call["msal_python_own_cache"]["median_ms"],
        },
    }
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "broker.json"), "w") as file:
        json.dump(result, file, indent=2)
    with open(os.path.join(RESULTS, "BROKER.md"), "w") as file:
        file.write(report(result))
    print(report(result))


def report(result):
    def row(name, s):
        return "| %s | %.2f | %.2f | %.2f | %d |\n" % (name, s["median_ms"], s["min_ms"], s["max_ms"], s["runs"])

    p, c, r = result["process"], result["call"], result["ratios"]
    return ("# Identity broker benchmark%s\n\n" % (" (smoke)" if result["smoke"] else "")
            + "Written by `scripts/bench-broker.sh` (Benchmarks/scripts/bench_broker.py) on %s; %d CPUs, 1-minute load %.2f "
              "at the end. MSAL Python 1.39 with pymsalruntime 0.20.7; `%s`; the local identity "
              "provider behind TLS at login.microsoftonline.com; gnome-keyring on a private bus. The broker served %d "
              "acquireTokenSilently calls during the run, one per measured broker call.\n\n" % (
                  result["when"], result["machine"]["cpus"], result["machine"]["load_1min"], result["cli"], result["broker_requests_served"])
            + "## Per process (a script run: Python start-up, imports, the call)\n\n"
              "| | median ms | min | max | runs |\n|---|---|---|---|---|\n"
            + row("MSAL Python, token through `tokencache broker` (app and runtime caches emptied before each run)", p["msal_python_through_tokencache_broker"])
            + row("the same app without the broker, token in its own MSAL cache file", p["msal_python_own_cache"])
            + row("the broker-enabled app when its own MSAL cache answers (the runtime loaded, not asked)", p["msal_python_broker_enabled_own_cache"])
            + row("`tokencache token` (cold)", p["tokencache_token_cold"])
            + "\n## Per call (inside one app process)\n\n| | median ms | min | max | runs |\n|---|---|---|---|---|\n"
            + row("`acquire_token_silent` through `tokencache broker` (both caches emptied before each call)", c["msal_python_through_tokencache_broker"])
            + row("`acquire_token_silent` from the app's own in-memory MSAL cache", c["msal_python_own_cache"])
            + row("of which the broker: `acquireTokenSilently` alone, GDBus to `tokencache broker`", c["bus_round_trip_only"])
            + "\n## Ratios (medians)\n\n"
              "- per process, through the broker / own MSAL cache: **%.2fx** (goal: no slower, 1.0x)\n"
              "- per process, through the broker / the broker-enabled app answered by its own cache: %.2fx\n"
              "- per process, through the broker / cold `tokencache token`: %.1fx\n"
              "- per call, through the broker / own in-memory cache: %.0fx; the broker's own share of a call through it: %.1f%%\n"
            % (r["process_broker_over_own_cache"], r["process_broker_over_broker_enabled_own_cache"],
               r["process_broker_over_tokencache_token"], r["call_broker_over_own_cache"], 100 * r["call_broker_share"]))


if __name__ == "__main__":
    main()
