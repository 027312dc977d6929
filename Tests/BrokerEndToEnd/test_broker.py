"""End-to-end tests of `tokencache broker` with the real Microsoft authentication runtime as its peer
(MSAL Python 1.39, `enable_broker_on_linux=True`, pymsalruntime 0.20.7): run by scripts/test-broker.sh
inside scripts/with-broker-harness.sh (login.microsoftonline.com is the local identity provider over TLS,
a private session bus with gnome-keyring, a temporary HOME, no network). One bus and one broker for all
cases; the cases run in order (unittest sorts by name) and build on each other's state, as a user's
session would: sign in with `tokencache login`, then broker-enabled apps come and go.

Environment: TOKENCACHE_CLI (the tokencache binary), TOKENCACHE_TEST_PYTHON (the venv's Python with
msal[broker]), and the harness's TOKENCACHE_TEST_IDP.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ["TOKENCACHE_CLI"]
PYTHON = os.environ["TOKENCACHE_TEST_PYTHON"]
IDP = os.environ["TOKENCACHE_TEST_IDP"]
TENANT = "72f988bf-0000-0000-0000-00000000b0b1"
AUTHORITY = "https://login.microsoftonline.com/" + TENANT
USER = {"uid": "b0b0b0b0-0000-0000-0000-000000000047", "utid": TENANT, "username": "bob@contoso.com", "name": "Bob"}
HOME_ACCOUNT_ID = USER["uid"] + "." + TENANT
# Clients: the one `tokencache login` signed in, and broker-enabled apps of the same family (FOCI "1"),
# each new to the runtime's own keyring cache (it keeps one per client).
LOGIN_CLIENT = "04b07795-0000-0000-0000-0000000b0047"
APP_SAME = LOGIN_CLIENT                            # (a): the app is the client that signed in
APP_FAMILY = "1950a258-0000-0000-0000-0000000b0047"  # (b), (c): another app of the family
APP_REFUSED = "d3590ed6-0000-0000-0000-0000000b0047"  # (d): outside `--client`
BROKER_NAME = "com.microsoft.identity.broker1"
STAND_IN = os.path.join(HERE, "..", "TokenCacheTestIdentityProvider", "Fixtures", "stand_in_broker.py")


def idp(path, body=None):
    request = urllib.request.Request(IDP + path, data=json.dumps(body).encode() if body is not None else None,
                                     method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


def run(arguments, timeout=60, **kwargs):
    return subprocess.run(arguments, capture_output=True, text=True, timeout=timeout, **kwargs)


def owner(name):
    """The unique name owning NAME on the session bus, or None."""
    result = run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                  "org.freedesktop.DBus.GetNameOwner", "string:" + name])
    found = re.search(r'string "(:[0-9.]+)"', result.stdout)
    return found.group(1) if found else None


class Broker:
    """`tokencache broker ARGS` in the foreground, serving once it says so on stderr."""

    def __init__(self, *arguments):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="broker-", suffix=".log", delete=False)
        self.process = subprocess.Popen([CLI, "broker", *arguments], stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "serving group" in self.text():
                break
            if self.process.poll() is not None:
                raise AssertionError("tokencache broker exited %s: %s" % (self.process.returncode, self.text()))
            time.sleep(0.05)
        else:
            raise AssertionError("tokencache broker never said it was serving: " + self.text())
        assert owner(BROKER_NAME), "the broker said it serves but owns no name"

    def text(self):
        with open(self.log.name) as file:
            return file.read()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        deadline = time.monotonic() + 10
        while owner(BROKER_NAME) and time.monotonic() < deadline:
            time.sleep(0.05)


def app(client, action, **request):
    """One run of the broker-enabled MSAL Python app (Fixtures: msal_broker_app.py); its MSAL cache
    is a file per client, kept between runs as an app keeps it."""
    request = dict(request, client=client, authority=AUTHORITY, action=action,
                   cache=os.path.join(os.environ["HOME"], "msal-cache-%s.json" % client))
    result = run([PYTHON, os.path.join(HERE, "msal_broker_app.py"), json.dumps(request)], timeout=120)
    if result.returncode != 0:
        raise AssertionError("msal_broker_app.py %s failed (%d): %s" % (action, result.returncode, result.stderr[-3000:]))
    return json.loads(result.stdout)


def bus_call(method, request, as_nobody=False):
    """One broker method called with dbus-send, as sso-mib's client calls it: (exit status, reply JSON or None, stderr)."""
    call = ["dbus-send", "--session", "--print-reply", "--dest=" + BROKER_NAME, "/com/microsoft/identity/broker1",
            "com.microsoft.identity.Broker1." + method, "string:0.0", "string:" + str(uuid.uuid4()), "string:" + json.dumps(request)]
    if as_nobody:
        call = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--reset-env", "env",
                "DBUS_SESSION_BUS_ADDRESS=" + os.environ["DBUS_SESSION_BUS_ADDRESS"], *call]
    result = run(call)
    found = re.search(r'string "(.*)"\s*$', result.stdout, re.S)  # dbus-send prints the string as is, unescaped
    return result.returncode, json.loads(found.group(1)) if found else None, result.stderr


def grants():
    return idp("/stats")["grants"]


def issued_access_token(grant):
    """The access token the provider issued with a grant's refresh token: they share the counter."""
    return "at-issued-" + grant["issued"].rsplit("-", 1)[1]


def sign_in_with_tokencache_login():
    """The user signs in with `tokencache login` (device code, approved at the provider as the user would) for
    LOGIN_CLIENT, the family's apps known to the provider; returns the access token login saved."""
    idp("/control", {"sign_in_user": USER, "device_interval": 1,
                     "family_clients": {LOGIN_CLIENT: "1", APP_FAMILY: "1", APP_REFUSED: "1"}})
    login = subprocess.Popen([CLI, "login", "--device-code", "--client", LOGIN_CLIENT, "--authority", AUTHORITY,
                              "--scopes", "User.Read"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    code = None
    for line in login.stderr:
        found = re.search(r"enter the code (\w+)", line)
        if found:
            code = found.group(1)
            break
    assert code, "tokencache login showed no device code"
    idp("/control", {"approve_device": code})
    out, err = login.communicate(timeout=60)
    assert login.returncode == 0, "tokencache login failed: " + err
    assert USER["username"] in out, out
    token = run([CLI, "token", "--client", LOGIN_CLIENT, "--scopes", "User.Read", "--no-refresh"]).stdout.strip()
    assert token.startswith("at-issued-"), "tokencache token after login printed no token"
    return token


class BrokerEndToEnd(unittest.TestCase):
    broker = None
    monitor = None

    @classmethod
    def setUpClass(cls):
        # Everything on the bus from here on, for the secret scan (f).
        # In the temporary HOME (it holds access tokens by design), not in TMPDIR, which the run's secret check scans
        # with the brokers' logs.
        cls.capture = tempfile.NamedTemporaryFile("w+", prefix="bus-", suffix=".txt", dir=os.environ["HOME"], delete=False)
        cls.monitor = subprocess.Popen(["dbus-monitor", "--session"], stdout=cls.capture, stderr=subprocess.STDOUT)
        cls.login_token = sign_in_with_tokencache_login()
        # The user allows APP_FAMILY, new here: without that the broker lists no account for it and
        # redeems no family refresh token for it (#57; test_d checks the default).
        cls.broker = Broker("--client", LOGIN_CLIENT, "--client", APP_FAMILY)

    @classmethod
    def tearDownClass(cls):
        if cls.broker:
            cls.broker.stop()
        if cls.monitor:
            cls.monitor.terminate()
            cls.monitor.wait()

    def flushed_capture(self):
        """The monitor's capture once it holds a marker signal sent after everything before it."""
        marker = "capture-marker-" + str(uuid.uuid4())
        sent = run(["dbus-send", "--session", "--type=signal", "/org/example/BrokerTest", "org.example.BrokerTest.Marker",
                    "string:" + marker])
        self.assertEqual(sent.returncode, 0, sent.stderr)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(self.capture.name) as file:
                capture = file.read()
            if marker in capture:
                return capture
            time.sleep(0.05)
        self.fail("dbus-monitor never wrote the marker: it saw nothing")

    def test_a_signed_in_user_is_found_by_a_broker_enabled_msal_app(self):
        before = len(grants())
        answer = app(APP_SAME, "sign_in")["result"]
        self.assertEqual(answer.get("token_source"), "broker", answer)
        self.assertEqual(answer.get("access_token"), self.login_token, "the app gets the token `tokencache login` saved")
        self.assertEqual(len(grants()), before, "a valid cached token is served without a request to the provider")
        accounts = app(APP_SAME, "accounts")["accounts"]
        self.assertEqual([(a["username"], a["home_account_id"], a["account_source"]) for a in accounts],
                         [(USER["username"], HOME_ACCOUNT_ID, "broker")])

    def test_b_silent_token_then_after_expiry_a_refresh_by_tokencache_at_the_issuing_host(self):
        # Access tokens issued from now on live 2 minutes: MSAL, the runtime and tokencache all take a token
        # with less than 5 minutes left as expired, so every later silent call needs a new one.
        idp("/control", {"expires_in": 120})
        try:
            login_refresh_token = idp("/stats")["issued_refresh_tokens"][-1]
            first = app(APP_FAMILY, "sign_in")["result"]
            self.assertEqual(first.get("token_source"), "broker", first)
            redeemed = grants()[-1]
            self.assertEqual((redeemed["client_id"], redeemed["redeemed"], redeemed["outcome"]),
                             (APP_FAMILY, login_refresh_token, "ok"),
                             "the family's refresh token from `tokencache login` is redeemed for the new app by tokencache")
            self.assertEqual(first["access_token"], issued_access_token(redeemed))

            silent = app(APP_FAMILY, "silent", username=USER["username"])
            self.assertTrue(silent["account_found"], silent)
            refreshed = grants()[-1]
            self.assertEqual((refreshed["client_id"], refreshed["redeemed"], refreshed["outcome"]),
                             (APP_FAMILY, redeemed["issued"], "ok"),
                             "after expiry tokencache redeems the app's rotated refresh token")
            self.assertEqual(refreshed["sdk"], "-", "the refresh is tokencache's (MSAL Python sends x-client-sku)")
            self.assertEqual((refreshed["host"], refreshed["path"]), ("login.microsoftonline.com", "/%s/oauth2/v2.0/token" % TENANT),
                             "redeemed at the host and tenant that issued it")
            self.assertEqual(silent["result"].get("access_token"), issued_access_token(refreshed), silent)
            self.assertEqual(silent["result"].get("token_source"), "broker", silent)
        finally:
            idp("/control", {"expires_in": 3600})

    def test_c_app_cannot_sign_out_a_client_another_app_uses_and_the_account_stays(self):
        app(APP_FAMILY, "sign_in")
        self.assertEqual(len(app(APP_FAMILY, "accounts")["accounts"]), 1)
        # MSAL Python's remove_account is the runtime's signout_silently: in 0.20.7 it forgets the account in the
        # app's and the runtime's caches and sends nothing on the bus. A broker client that signs out (sso-mib's
        # mib_client_app_remove_account) sends removeAccount {"clientId", "account"}. Here that client is another
        # executable (dbus-send) than the app that uses the client (MSAL Python's interpreter): since #57 item 5 it
        # may not sign that app out without the user's yes, and the account stays.
        self.assertEqual(app(APP_FAMILY, "remove", username=USER["username"]), {"removed": True})
        self.assertEqual(app(APP_FAMILY, "accounts")["accounts"], [], "the app forgot the account")
        status, listed, error = bus_call("getAccounts", {"clientId": APP_FAMILY, "redirectUri": APP_FAMILY})
        self.assertEqual(status, 0, error)
        status, reply, error = bus_call("removeAccount", {"clientId": APP_FAMILY, "account": listed["accounts"][0]})
        self.assertEqual(status, 0, error)
        self.assertIn("may not sign it out", json.dumps(reply), reply)
        status, after, error = bus_call("getAccounts", {"clientId": APP_FAMILY, "redirectUri": APP_FAMILY})
        self.assertEqual(len(after.get("accounts", [])), 1, "the account stays for the app that uses the client")

        listed = run([CLI, "list", "--json"])
        self.assertIn(USER["username"], listed.stdout, listed.stderr)
        other = run([CLI, "token", "--client", LOGIN_CLIENT, "--scopes", "User.Read", "--no-refresh"])
        self.assertEqual(other.stdout.strip(), self.login_token, "the client that signed in keeps its token")
        status, still, error = bus_call("getAccounts", {"clientId": LOGIN_CLIENT, "redirectUri": LOGIN_CLIENT})
        self.assertEqual([a["username"] for a in still["accounts"]], [USER["username"]], "other apps still find the account")

    def test_d_client_outside_the_policy_is_refused(self):
        type(self).broker.stop()
        # By default (no --client), a family client that never signed in here gets no account and no token.
        type(self).broker = Broker()
        before = len(grants())
        status, listed, error = bus_call("getAccounts", {"clientId": APP_REFUSED, "redirectUri": APP_REFUSED})
        self.assertEqual((status, listed), (0, {"accounts": []}), error)
        status, refused, error = bus_call("acquireTokenSilently", {"authParameters": {
            "clientId": APP_REFUSED, "authority": AUTHORITY, "requestedScopes": ["User.Read"],
            "account": {"homeAccountId": HOME_ACCOUNT_ID, "username": USER["username"]}}})
        self.assertEqual(refused.get("error", {}).get("status"), 9, refused)
        self.assertIn("has not signed in here", refused["error"]["context"], refused)
        self.assertEqual(len(grants()), before, "no family refresh token is redeemed for a client new here")
        self.assertRegex(type(self).broker.text(), r"/usr/bin/dbus-send\[\d+\].*refused", "the log names the caller by its executable")
        status, reply, error = bus_call("getAccounts", {"clientId": LOGIN_CLIENT, "redirectUri": LOGIN_CLIENT})
        self.assertEqual([a["username"] for a in reply["accounts"]], [USER["username"]], "the client that signed in is served")
        type(self).broker.stop()
        type(self).broker = Broker("--client", LOGIN_CLIENT)
        answer = app(APP_REFUSED, "sign_in")["result"]
        self.assertNotIn("access_token", answer, answer)
        self.assertEqual(answer.get("error"), "broker_error", answer)
        # The policy's refusal reaches the app as the runtime's IncorrectConfiguration (status 9), which MSAL Python
        # returns as is (it would go on to an interactive sign-in only after InteractionRequired or AccountUnusable).
        self.assertIn("Status_IncorrectConfiguration", answer.get("error_description", ""), answer)
        self.assertEqual(len(grants()), before, "nothing is redeemed for a refused client")
        self.assertRegex(type(self).broker.text(), "client %s.*refused" % APP_REFUSED, "the request log names the refusal")
        status, reply, error = bus_call("getAccounts", {"clientId": LOGIN_CLIENT, "redirectUri": LOGIN_CLIENT})
        self.assertEqual([a["username"] for a in reply["accounts"]], [USER["username"]], "the allowed client is still served")

    def test_e_another_uid_cannot_reach_the_broker_on_the_private_bus(self):
        request = {"clientId": LOGIN_CLIENT, "redirectUri": LOGIN_CLIENT}
        status, reply, error = bus_call("getAccounts", request)
        self.assertEqual(status, 0, error)
        self.assertIn(USER["username"], json.dumps(reply), "the same call as the bus's user is answered")
        status, reply, error = bus_call("getAccounts", request, as_nobody=True)
        self.assertNotEqual(status, 0)
        self.assertIsNone(reply)
        # The bus itself refuses the connection (EXTERNAL authentication as another uid): no request is made.
        self.assertIn('Failed to open connection to "session" message bus', error)
        self.assertNotIn("uid 65534", type(self).broker.text())

    def test_e_malformed_requests_get_a_typed_error_and_the_broker_keeps_serving(self):
        from gi.repository import Gio, GLib
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)

        def ask(method, request):
            reply = bus.call_sync(BROKER_NAME, "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1", method,
                                  GLib.Variant("(sss)", ("0.0", str(uuid.uuid4()), request)), GLib.VariantType("(s)"),
                                  Gio.DBusCallFlags.NONE, 30000, None)
            return json.loads(reply.unpack()[0])

        for method, request in (("getAccounts", "not json"), ("acquireTokenSilently", "[1, 2]"),
                                ("getAccounts", json.dumps({"clientId": 47, "redirectUri": []})),
                                ("acquireTokenSilently", json.dumps({"authParameters": {"clientId": LOGIN_CLIENT, "requestedScopes": "User.Read"}})),
                                ("acquireTokenSilently", json.dumps({"authParameters": {"clientId": LOGIN_CLIENT, "pad": "x" * (4 << 20)}}))):
            answer = ask(method, request)
            error = answer.get("error", {})
            # The runtime's ApiContractViolation, with the members it requires (docs/BROKER.md, Errors).
            self.assertEqual(error.get("status"), 6, (method, request[:80], answer))
            self.assertTrue(all(isinstance(error.get(key), int) for key in ("errorCode", "tag")), answer)
        self.assertIsNone(type(self).broker.process.poll(), "the broker is still running")
        self.assertEqual([a["username"] for a in ask("getAccounts", json.dumps({"clientId": LOGIN_CLIENT, "redirectUri": LOGIN_CLIENT}))["accounts"]],
                         [USER["username"]], "and still serves")

    def test_f_no_refresh_token_ever_crosses_the_bus(self):
        issued = idp("/stats")["issued_refresh_tokens"]
        self.assertGreaterEqual(len(issued), 2, "the flows above redeemed refresh tokens")
        capture = self.flushed_capture()
        self.assertIn("brokerTokenResponse", capture, "the capture holds the broker's replies (else it proves nothing)")
        self.assertIn(self.login_token, capture, "access tokens do cross the bus: the monitor saw them")
        leaked = [token for token in issued if token in capture]
        self.assertEqual(leaked, [], "refresh tokens on the bus")
        self.assertNotRegex(capture, r"rt-rotated-\d+", "no refresh token of the provider's form at all")


class WireFormat(unittest.TestCase):
    """docs/BROKER.md's "Wire format as accepted by MSALRuntime 0.20.7", checked against the runtime: the stand-in
    broker (STAND_IN, also the broker client's tests') answers the documented shapes, one member changed at a time, and the runtime
    (runtime_probe.py, pymsalruntime called directly) accepts or rejects them as documented. Runs after
    BrokerEndToEnd (unittest orders classes by name), which gives the name back when it stops its broker."""

    CLIENT = "0c0c0c0c-0000-0000-0000-0000000b0047"  # new to the runtime's own cache

    def test_documented_shapes_are_accepted_and_the_rest_rejected_as_documented(self):
        self.assertIsNone(owner(BROKER_NAME), "tokencache broker still owns the name")
        work = tempfile.mkdtemp(prefix="wire-", dir=os.environ["HOME"])
        log, replies = os.path.join(work, "calls.jsonl"), os.path.join(work, "replies.json")
        with open(replies, "w") as file:
            json.dump({}, file)
        stand_in = subprocess.Popen(["/usr/bin/python3", STAND_IN, replies, log], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(stand_in.stdout.readline().strip(), "ready")
            probe = run([PYTHON, os.path.join(HERE, "runtime_probe.py"), replies, self.CLIENT], timeout=120)
            self.assertEqual(probe.returncode, 0, probe.stderr[-3000:])
        finally:
            stand_in.terminate()
            stand_in.wait(timeout=10)
            stand_in.stdout.close()
        results = json.loads(probe.stdout)
        with open(log) as file:
            calls = [json.loads(line) for line in file]

        documented = results["documented"]
        self.assertEqual((documented.get("token"), documented["scopes"]), ("at-wire-format", ["User.Read"]), documented)
        self.assertTrue(3000 <= documented["expires_in"] <= 3600, "expiresOn is in milliseconds")
        for member in ("accessTokenType", "expiresOn", "extendedExpiresOn", "clientInfo", "idToken"):
            self.assertNotIn("token", results["without " + member], member + " is required")
        for member in ("account", "grantedScopes"):
            self.assertEqual(results["without " + member].get("token"), "at-wire-format", member + " is optional")
        self.assertLess(results["expiresOn in seconds"]["expires_in"], 0, "seconds are read as milliseconds")
        self.assertEqual(results["declined scope"]["status"], "Status_ApiContractViolation")
        self.assertIn("declined scopes", results["declined scope"]["context"])
        self.assertEqual(results["granted superset"].get("token"), "at-wire-format")
        for status, name in ((2, "InteractionRequired"), (9, "IncorrectConfiguration"), (13, "AccountUnusable"),
                             (19, "AccountNotFound"), (22, "Unexpected")):
            self.assertEqual(results["status %d" % status]["status"], "Status_" + name, status)
        self.assertEqual(results["status 9"]["error_code"], 47, "errorCode is passed on")
        self.assertIn("'tag'", results["error without tag"]["context"])
        self.assertIn("'errorCode'", results["error without errorCode"]["context"])
        self.assertEqual(results["error with extra members"]["status"], "Status_IncorrectConfiguration")
        self.assertEqual(results["silent from the runtime's cache"].get("token"), "at-cached-by-runtime")

        first = calls[0]
        self.assertEqual((first["method"], first["protocol"], first["request"]),
                         ("getAccounts", "0.0", {"clientId": self.CLIENT, "redirectUri": self.CLIENT}))
        silently = calls[1]["request"]["authParameters"]
        self.assertEqual((calls[1]["method"], silently["clientId"], silently["requestedScopes"], silently["account"]["homeAccountId"]),
                         ("acquireTokenSilently", self.CLIENT, ["User.Read"], "c0c0c0c0-0000-0000-0000-000000000047." + TENANT))
        self.assertEqual(silently["redirectUri"], "https://login.microsoftonline.com/common/oauth2/nativeclient")
        self.assertEqual(calls[-1]["method"], "acquireTokenSilently", "the cached token was served without asking the broker")
        self.assertEqual(calls[-1]["reply"]["brokerTokenResponse"]["accessToken"], "at-cached-by-runtime")


if __name__ == "__main__":
    unittest.main(verbosity=2)
