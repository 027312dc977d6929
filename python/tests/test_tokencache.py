"""Tests of the Python binding against libtokencache and a real, isolated keyring: run by
scripts/test-python.sh inside scripts/with-test-keyring.sh (TOKENCACHE_TEST_KEYRING=1)."""

import base64
import json
import os
import subprocess
import sys
import threading
import time
import unittest

import tokencache

GROUP = "org.example.pytest"
CLIENT_A = "aaaaaaaa-0000-0000-0000-00000000p0a1"
CLIENT_B = "aaaaaaaa-0000-0000-0000-00000000p0b2"
TENANT = "11111111-1111-1111-1111-111111111111"
AUTHORITY = f"https://login.microsoftonline.com/{TENANT}"
UID = "da7e0000-0000-0000-0000-000000000001"
HOME = f"{UID}.{TENANT}"
USERNAME = "dave@contoso.com"


def b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def response(tag, refresh=True):
    body = {"token_type": "Bearer", "expires_in": 3600, "scope": "User.Read Mail.Read",
            "access_token": f"at-py-{tag}", "foci": "1",
            "client_info": b64({"uid": UID, "utid": TENANT}),
            "id_token": f"{b64({'alg': 'none'})}.{b64({'aud': 'x', 'iss': f'https://login.microsoftonline.com/{TENANT}/v2.0', 'sub': 's', 'oid': UID, 'tid': TENANT, 'preferred_username': USERNAME, 'name': 'Dave'})}.c2ln"}
    if refresh:
        body["refresh_token"] = f"rt-py-{tag}"
    return json.dumps(body)


def open_empty_store(test):
    """The test group's store on the test keyring, emptied, closed after the test."""
    test.assertEqual(os.environ.get("TOKENCACHE_TEST_KEYRING"), "1", "run inside scripts/with-test-keyring.sh")
    store = tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE)
    test.addCleanup(store.close)
    for account in store.accounts():
        store.remove_account(account.home_account_id)
    return store


def start_idp(test):
    """Starts the local identity provider for a test: its authority, and a function calling its endpoints."""
    idp = subprocess.Popen([sys.executable, "Tests/TokenCacheTestIdentityProvider/Fixtures/fake_idp.py"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    test.addCleanup(idp.stdout.close)
    test.addCleanup(idp.wait)
    test.addCleanup(idp.stdin.close)
    port = int(idp.stdout.readline())

    def control(path, body=None):
        import urllib.request
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode() if body else None)
        return json.load(urllib.request.urlopen(request))

    return f"http://127.0.0.1:{port}/{TENANT}", control  # plain http is allowed on loopback only


class BindingTests(unittest.TestCase):
    def setUp(self):
        self.store = open_empty_store(self)

    def test_version_matches_package(self):
        self.assertEqual(tokencache.library_version(), "0.6.0")

    def test_round_trip_list_find_sign_out_remove(self):
        saved = self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", response("1"))
        self.assertEqual(saved.home_account_id, HOME)
        self.assertEqual(saved.access_token, "")  # save hands back no secret
        self.assertEqual([a.username for a in self.store.accounts(CLIENT_A)], [USERNAME])
        self.assertEqual([a.home_account_id for a in self.store.accounts(CLIENT_B)], [HOME])  # family SSO
        token = self.store.find_access_token(CLIENT_A, USERNAME, ["User.Read"])
        self.assertEqual(token.access_token, "at-py-1")
        self.assertEqual(token.authorization_header, "Bearer at-py-1")
        self.assertIn("Mail.Read", token.scopes)
        self.assertTrue(token.is_from_cache)
        self.assertNotIn("at-py-1", repr(token))
        self.assertIsNone(self.store.find_access_token(CLIENT_A, USERNAME, "Files.Read"))
        silent = self.store.acquire_token_silent(CLIENT_A, AUTHORITY, HOME, "User.Read")
        self.assertEqual(silent.access_token, "at-py-1")
        self.store.sign_out(CLIENT_A, USERNAME)
        self.assertEqual(self.store.accounts(CLIENT_A), [])
        self.assertIsNone(self.store.find_access_token(CLIENT_A, USERNAME, "User.Read"))
        self.assertEqual(len(self.store.accounts(CLIENT_B)), 1)
        self.assertGreater(self.store.remove_account(USERNAME), 0)
        self.assertEqual(self.store.accounts(), [])

    def test_errors_carry_code_name_message_and_hint(self):
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            tokencache.Store.open("not a group")
        self.assertEqual(caught.exception.code, tokencache.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.name, "TOKENCACHE_E_INVALID_ARGUMENT")
        self.assertIn("group", caught.exception.message)
        self.assertEqual(caught.exception.reason, "none")
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.accounts("\udcff")
        self.assertEqual(caught.exception.code, tokencache.INVALID_ARGUMENT)
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", '{"access_token":')
        self.assertEqual(caught.exception.name, "TOKENCACHE_E_INVALID_TOKEN_RESPONSE")
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.remove_account("nobody@example.com")
        self.assertEqual(caught.exception.code, tokencache.NOT_FOUND)

    def test_silent_without_refresh_token_requires_interaction(self):
        self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", response("nort", refresh=False))
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.acquire_token_silent(CLIENT_A, AUTHORITY, USERNAME, "Files.Read", force_refresh=True)
        self.assertEqual(caught.exception.code, tokencache.INTERACTION_REQUIRED)
        # The reason says what to do: no cached refresh token, so sign in (not: the server refused one).
        self.assertEqual(caught.exception.reason, "no_refresh_token")
        self.assertTrue(caught.exception.hint)
        self.assertNotIn("at-py", str(caught.exception))

    def test_acquire_silent_redeems_the_family_refresh_token_at_the_authority(self):
        authority, control = start_idp(self)
        body = json.loads(response("idp"))
        body["refresh_token"] = "rt-py-family"
        self.store.save_response(CLIENT_A, authority, "User.Read", json.dumps(body))
        control("/control", {"seed": {"refresh_token": "rt-py-family", "uid": UID, "utid": TENANT, "client_id": CLIENT_A,
                                      "username": USERNAME, "family": "1"}})
        # App B never signed in: its token comes from redeeming A's family refresh token, and is saved.
        token = self.store.acquire_token_silent(CLIENT_B, authority, USERNAME, "User.Read")
        self.assertFalse(token.is_from_cache)
        self.assertTrue(token.access_token.startswith("at-issued-"), token)
        again = self.store.acquire_token_silent(CLIENT_B, authority, USERNAME, "User.Read")
        self.assertTrue(again.is_from_cache)
        self.assertEqual(again.access_token, token.access_token)
        stats = control("/stats")
        self.assertEqual(stats["token_requests"], 1)
        self.assertEqual((stats["grants"][0]["client_id"], stats["grants"][0]["redeemed"]), (CLIENT_B, "rt-py-family"))

    def test_claims_challenge_with_client_capabilities(self):
        """CAE (#47): cp1 merged into claims as MSAL sends it (capabilities only, claims only, both); a resource's
        insufficient_claims header answered with a refresh whose token the resource accepts; a refusal's claims
        on the error."""
        import base64
        import urllib.error
        import urllib.request
        authority, control = start_idp(self)
        base = authority.rsplit("/", 1)[0]
        body = json.loads(response("idp"))
        body["refresh_token"] = "rt-py-cae"
        self.store.save_response(CLIENT_A, authority, "User.Read", json.dumps(body))
        control("/control", {"seed": {"refresh_token": "rt-py-cae", "uid": UID, "utid": TENANT, "client_id": CLIENT_A,
                                      "username": USERNAME}})

        def resource(token):
            request = urllib.request.Request(f"{base}/resource", headers={"Authorization": f"Bearer {token}"})
            try:
                urllib.request.urlopen(request)
                return 200, None
            except urllib.error.HTTPError as refused:
                return refused.code, refused.headers.get("WWW-Authenticate")

        def sent():
            return json.loads(control("/stats")["grants"][-1]["claims"])

        challenge = '{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}'
        self.store.set_client_capabilities(["cp1"])
        first = self.store.acquire_token_silent(CLIENT_A, authority, USERNAME, "User.Read", force_refresh=True)
        self.assertEqual(sent(), {"access_token": {"xms_cc": {"values": ["cp1"]}}})
        self.assertEqual(resource(first.access_token), (200, None))
        self.store.set_client_capabilities(None)
        self.store.acquire_token_silent(CLIENT_A, authority, USERNAME, "User.Read", claims_challenge=challenge)
        self.assertEqual(control("/stats")["grants"][-1]["claims"], challenge)

        self.store.set_client_capabilities("cp1")
        control("/control", {"cae_challenge": challenge})
        status, header = resource(first.access_token)
        self.assertEqual(status, 401)
        claims = tokencache.claims_from_www_authenticate(header)
        self.assertEqual(claims, challenge)
        self.assertIsNone(tokencache.claims_from_www_authenticate('Bearer error="invalid_token"'))
        token = self.store.acquire_token_silent(CLIENT_A, authority, USERNAME, "User.Read", claims_challenge=claims)
        self.assertFalse(token.is_from_cache)
        self.assertEqual(sent(), {"access_token": {"nbf": {"essential": True, "value": "1604106651"}, "xms_cc": {"values": ["cp1"]}}})
        self.assertEqual(resource(token.access_token), (200, None))

        mfa = '{"access_token":{"capolids":{"essential":true,"values":["c0ffee00-0000-0000-0000-000000000000"]}}}'
        control("/control", {"refresh_interaction_claims": mfa})
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.acquire_token_silent(CLIENT_A, authority, USERNAME, "User.Read", claims_challenge=claims)
        self.assertEqual(caught.exception.code, tokencache.INTERACTION_REQUIRED)
        self.assertEqual(caught.exception.claims, mfa)
        with self.assertRaises(tokencache.TokenCacheError) as bad:
            self.store.set_client_capabilities(["cp1;"])
        self.assertEqual(bad.exception.code, tokencache.INVALID_ARGUMENT)

    def test_single_sign_on_with_azure_cli_cache(self):
        import tempfile
        authority, control = start_idp(self)
        config = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", config])
        previous = os.environ.get("AZURE_CONFIG_DIR")
        os.environ["AZURE_CONFIG_DIR"] = config
        self.addCleanup(lambda: os.environ.pop("AZURE_CONFIG_DIR") if previous is None else os.environ.update(AZURE_CONFIG_DIR=previous))
        # Azure CLI signed Dave in: its cache with the entries and keys MSAL Python writes (this test
        # also runs with the system Python, which has no msal), holding a family refresh token.
        azure_cli = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
        env = "127.0.0.1"
        cache = {
            "Account": {f"{HOME}-{env}-{TENANT}": {"home_account_id": HOME, "environment": env, "realm": TENANT,
                                                   "local_account_id": UID, "username": USERNAME, "authority_type": "MSSTS"}},
            "RefreshToken": {f"{HOME}-{env}-refreshtoken-{azure_cli}--": {
                "credential_type": "RefreshToken", "secret": "rt-py-azure-cli", "home_account_id": HOME, "environment": env,
                "client_id": azure_cli, "target": "User.Read", "last_modification_time": str(int(time.time())), "family_id": "1"}},
            "AppMetadata": {f"appmetadata-{env}-{azure_cli}": {"client_id": azure_cli, "environment": env, "family_id": "1"}},
            "AccessToken": {}, "IdToken": {},
        }
        path = os.path.join(config, "msal_token_cache.json")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:  # as msal-extensions does
            json.dump(cache, handle, indent=4)
        control("/control", {"seed": {"refresh_token": "rt-py-azure-cli", "uid": UID, "utid": TENANT, "client_id": azure_cli,
                                      "username": USERNAME, "family": "1"}})
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.set_sso_stores("no-such-tool")
        self.assertEqual(caught.exception.code, tokencache.INVALID_ARGUMENT)
        # Off by default: the account is not the group's.
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.store.acquire_token_silent(CLIENT_B, authority, USERNAME, "User.Read")
        self.assertEqual(caught.exception.code, tokencache.NOT_FOUND)
        self.assertEqual(control("/stats")["token_requests"], 0)
        self.assertNotIn(USERNAME, [a.username for a in self.store.accounts(CLIENT_B)])
        self.store.set_sso_stores(["azure-cli"])
        # The app's list offers Azure CLI's account (its family token), without a request.
        self.assertIn(HOME, [a.home_account_id for a in self.store.accounts(CLIENT_B)])
        self.assertNotIn(HOME, [a.home_account_id for a in self.store.accounts()])  # the group's own: unchanged
        self.assertEqual(control("/stats")["token_requests"], 0)
        token = self.store.acquire_token_silent(CLIENT_B, authority, USERNAME, "User.Read")
        self.assertTrue(token.access_token.startswith("at-issued-"), token)
        grant = control("/stats")["grants"][0]
        self.assertEqual((grant["client_id"], grant["redeemed"]), (CLIENT_B, "rt-py-azure-cli"))
        with open(path) as handle:
            secrets = [entry["secret"] for entry in json.load(handle)["RefreshToken"].values()]
        self.assertEqual(secrets, [grant["issued"]])  # the rotated token went back to Azure CLI's cache
        self.store.set_sso_stores(None)
        self.assertTrue(self.store.acquire_token_silent(CLIENT_B, authority, USERNAME, "User.Read").is_from_cache)

    def test_closed_store_is_refused(self):
        store = tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE)
        store.close()
        with self.assertRaises(tokencache.ClosedError) as raised:
            store.accounts()
        self.assertIsInstance(raised.exception, tokencache.TokenCacheError)
        self.assertIn("closed", str(raised.exception))
        store.close()  # again: nothing happens

    def test_watch_reports_changes_until_stopped(self):
        seen = []
        changed = threading.Event()

        def on_change(accounts, error):
            self.assertIsNone(error)
            seen.append([a.username for a in accounts])
            changed.set()

        with self.store.watch_accounts(CLIENT_A, on_change, interval_ms=20):
            self.assertTrue(changed.wait(30))  # reported within milliseconds; 30 s for a loaded machine
            changed.clear()
            with tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE) as other:
                other.save_response(CLIENT_A, AUTHORITY, "User.Read", response("w"))
            self.assertTrue(changed.wait(30))
        self.assertEqual(seen, [[], [USERNAME]])

    def test_diagnose(self):
        report, usable = tokencache.diagnose(GROUP, tokencache.Backend.SECRET_SERVICE)
        self.assertTrue(usable)
        self.assertIn("Policy: secret-service", report)

    def test_saved_from_python_found_by_the_cli_and_back(self):
        cli = os.environ.get("TOKENCACHE_CLI")
        self.assertTrue(cli, "TOKENCACHE_CLI names the tokencache binary")
        self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", response("py2cli"))
        found = subprocess.run([cli, "token", "--backend", "secret-service", "--group", GROUP, "--client", CLIENT_A,
                                "--scopes", "User.Read", "--account", USERNAME], capture_output=True, text=True, check=True)
        self.assertEqual(found.stdout.strip(), "at-py-py2cli")
        subprocess.run([cli, "save", "--backend", "secret-service", "--group", GROUP, "--client", CLIENT_B,
                        "--authority", AUTHORITY, "--scopes", "User.Read"], input=response("cli2py"), text=True,
                       capture_output=True, check=True)
        self.assertEqual(self.store.find_access_token(CLIENT_B, USERNAME, "User.Read").access_token, "at-py-cli2py")

    def test_account_at_two_clouds_needs_an_authority(self):
        """A response another host saved claiming the same uid.utid is another account: without an
        authority nothing is guessed (AmbiguousAccountError naming both hosts), never its token."""
        cli = os.environ.get("TOKENCACHE_CLI")
        self.assertTrue(cli, "TOKENCACHE_CLI names the tokencache binary")
        planted = f"http://127.0.0.2:8400/{TENANT}"
        self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", response("dave"))
        self.store.save_response(CLIENT_A, planted, "User.Read", response("planted"))
        # The C interface removes by name only: the planted account goes through the CLI's --authority.
        self.addCleanup(subprocess.run, [cli, "remove", "--backend", "secret-service", "--group", GROUP, "--account", USERNAME,
                                         "--authority", planted, "--yes"], capture_output=True, check=True)
        for _ in range(5):
            with self.assertRaises(tokencache.AmbiguousAccountError) as caught:
                self.store.find_access_token(CLIENT_A, USERNAME, "User.Read")
            self.assertEqual(caught.exception.code, tokencache.AMBIGUOUS_ACCOUNT)
            self.assertEqual(caught.exception.name, "TOKENCACHE_E_AMBIGUOUS_ACCOUNT")
            self.assertIn("login.microsoftonline.com", caught.exception.message)
            self.assertIn("127.0.0.2", caught.exception.message)
            self.assertIsInstance(caught.exception, tokencache.TokenCacheError)
        self.assertEqual(self.store.find_access_token(CLIENT_A, USERNAME, "User.Read", AUTHORITY).access_token, "at-py-dave")
        self.assertEqual(self.store.find_access_token(CLIENT_A, USERNAME, "User.Read", planted).access_token, "at-py-planted")
        self.assertEqual(self.store.acquire_token_silent(CLIENT_A, AUTHORITY, USERNAME, "User.Read").access_token, "at-py-dave")
        self.assertEqual(sorted(a.environment for a in self.store.accounts(CLIENT_A)), ["127.0.0.2", "login.microsoftonline.com"])


# The race of #34 item 4, run in a child process so that a crash (the use-after-free this guards
# against was a SIGSEGV) is reported as the child's signal. Threads call the store until it is
# closed under them; the only failure allowed is ClosedError, once closed.
RACE_CHILD = r"""
import random, sys, threading, time
import tokencache
GROUP, CLIENT, USERNAME, ROUNDS, THREADS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
unexpected, closed_calls, calls = [], [0], [0]
count = threading.Lock()
for round in range(ROUNDS):
    store = tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE)
    started = threading.Barrier(THREADS + 1)
    watches = []

    def caller(index):
        started.wait()
        while True:
            try:
                if index % 3 == 0:
                    store.accounts(CLIENT)
                elif index % 3 == 1:
                    store.find_access_token(CLIENT, USERNAME, "User.Read")
                else:  # watches started and stopped while the store closes
                    watch = store.watch_accounts(CLIENT, lambda accounts, error: None, interval_ms=1)
                    watches.append(watch)
                    if random.random() < 0.5:
                        watch.stop()
                with count:
                    calls[0] += 1
            except tokencache.ClosedError:
                with count:
                    closed_calls[0] += 1
                return
            except BaseException as error:
                unexpected.append(repr(error))
                return

    threads = [threading.Thread(target=caller, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(random.uniform(0, 0.02))
    closers = [threading.Thread(target=store.close) for _ in range(2)]  # two closes at once
    for closer in closers:
        closer.start()
    for thread in threads + closers:
        thread.join()
    for watch in watches:  # stopped by the close: stopping again is a no-op
        watch.stop()
print(f"{calls[0]} calls, {closed_calls[0]} refused after close, {len(unexpected)} unexpected: {unexpected[:3]}")
sys.exit(1 if unexpected or closed_calls[0] != ROUNDS * THREADS else 0)
"""


class AgentTests(unittest.TestCase):
    """Store.acquire_token_silent through `tokencache agent` (docs/AGENT.md), from a fresh home."""

    def test_silent_on_a_default_store_asks_the_agent_and_the_home_stays_empty(self):
        import shutil
        import tempfile
        cli = os.environ.get("TOKENCACHE_CLI")
        self.assertTrue(cli, "TOKENCACHE_CLI names the tokencache binary")
        authority, control = start_idp(self)
        desktop, container, sockets = (tempfile.mkdtemp(prefix=p) for p in ("tc-desk-", "tc-box-", "tc-sock-"))
        for path in (desktop, container, sockets):
            self.addCleanup(shutil.rmtree, path, True)
        desk_env = dict(os.environ, HOME=desktop, XDG_DATA_HOME=f"{desktop}/data", XDG_CONFIG_HOME=f"{desktop}/config")
        local = ["--backend", "file", "--group", GROUP]
        body = json.loads(response("agent"))
        saved = subprocess.run([cli, "save", *local, "--client", CLIENT_A, "--authority", authority, "--scopes", "User.Read"],
                               input=json.dumps(body), env=desk_env, capture_output=True, text=True)
        self.assertEqual(saved.returncode, 0, saved.stderr)
        control("/control", {"seed": {"refresh_token": "rt-py-agent", "uid": UID, "utid": TENANT, "client_id": CLIENT_A,
                                      "username": USERNAME, "family": "1"}})
        agent = subprocess.Popen([cli, "agent", *local, "--socket", f"{sockets}/agent.sock", "--authority", authority],
                                 env=desk_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(agent.stdout.close)
        self.addCleanup(agent.wait)
        self.addCleanup(agent.terminate)
        lines = ""
        while "echo Agent pid" not in lines:
            line = agent.stdout.readline()
            self.assertTrue(line, "the agent exited before printing its socket")
            lines += line
        self.assertIn(f"TOKENCACHE_AGENT_SOCK='{sockets}/agent.sock'", lines)

        # The container: its own home, no D-Bus, only the agent's socket set.
        box_env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENCACHE_") or k == "TOKENCACHE_LIBRARY"}
        box_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        box_env.update(HOME=container, XDG_DATA_HOME=f"{container}/data", XDG_CONFIG_HOME=f"{container}/config",
                       XDG_RUNTIME_DIR=f"{container}/run", TOKENCACHE_AGENT_SOCK=f"{sockets}/agent.sock")
        code = ("import sys, tokencache\n"
                "store = tokencache.Store.open()\n"
                "try:\n"
                "    token = store.acquire_token_silent(sys.argv[1], sys.argv[2], sys.argv[3], 'User.Read')\n"
                "    print(token.access_token, token.username, token.is_from_cache)\n"
                "except tokencache.TokenCacheError as error:\n"
                "    sys.exit(error.name)\n")
        run = subprocess.run([sys.executable, "-c", code, CLIENT_B, authority, USERNAME], env=box_env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        token, username, from_cache = run.stdout.split()
        self.assertTrue(token.startswith("at-issued-"), run.stdout)
        self.assertEqual((username, from_cache), (USERNAME, "False"))
        stats = control("/stats")
        self.assertEqual((stats["grants"][0]["client_id"], stats["grants"][0]["redeemed"]), (CLIENT_B, "rt-py-agent"))
        self.assertEqual([name for _, _, names in os.walk(container) for name in names], [])

        # Another backend is a local cache chosen: the empty container's, not the agent's.
        code = code.replace("Store.open()", "Store.open(backend=tokencache.Backend.FILE)")
        local_run = subprocess.run([sys.executable, "-c", code, CLIENT_B, authority, USERNAME], env=box_env, capture_output=True, text=True)
        self.assertEqual((local_run.returncode, local_run.stdout), (1, ""))
        self.assertIn("NOT_FOUND", local_run.stderr)
        self.assertEqual(control("/stats")["token_requests"], 1)


    def test_a_socket_in_a_directory_others_can_write_is_refused_before_connecting(self):
        """#44: another user could have bound a socket in a world-writable directory such as /tmp."""
        import shutil
        import socket
        import tempfile
        shared, container = tempfile.mkdtemp(prefix="tc-shared-"), tempfile.mkdtemp(prefix="tc-box-")
        for path in (shared, container):
            self.addCleanup(shutil.rmtree, path, True)
        os.chmod(shared, 0o1777)
        listener = socket.socket(socket.AF_UNIX)
        self.addCleanup(listener.close)
        listener.bind(f"{shared}/agent.sock")
        listener.listen(4)
        listener.setblocking(False)
        box_env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENCACHE_") or k == "TOKENCACHE_LIBRARY"}
        box_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        box_env.update(HOME=container, XDG_DATA_HOME=f"{container}/data", XDG_CONFIG_HOME=f"{container}/config",
                       XDG_RUNTIME_DIR=f"{container}/run", TOKENCACHE_AGENT_SOCK=f"{shared}/agent.sock")
        code = ("import sys, tokencache\n"
                "store = tokencache.Store.open()\n"
                "try:\n"
                "    store.acquire_token_silent(sys.argv[1], 'https://login.microsoftonline.com/common', 'alice@contoso.com', 'User.Read')\n"
                "except tokencache.TokenCacheError as error:\n"
                "    print(error.name, error.reason)\n")
        run = subprocess.run([sys.executable, "-c", code, CLIENT_B], env=box_env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), ["TOKENCACHE_E_BACKEND_UNAVAILABLE", "agent_untrusted"])
        with self.assertRaises(BlockingIOError):  # no connection was ever made
            listener.accept()


    def test_sign_in_on_a_default_store_with_an_agent_set_runs_locally(self):
        """The agent answers token requests only: a sign-in on a default store (the agent set) runs here
        and fails with its own typed error at an unreachable authority, never a crash of the host (it
        aborted on a precondition before the fix)."""
        import shutil
        import tempfile
        home = tempfile.mkdtemp(prefix="tc-signin-agent-")
        self.addCleanup(shutil.rmtree, home, True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENCACHE_") or k == "TOKENCACHE_LIBRARY"}
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env.update(HOME=home, XDG_DATA_HOME=f"{home}/data", XDG_CONFIG_HOME=f"{home}/config", XDG_RUNTIME_DIR=home,
                   TOKENCACHE_AGENT_SOCK=f"{home}/agent.sock")
        code = ("import sys, tokencache\n"
                "store = tokencache.Store.open()\n"
                "try:\n"
                "    store.sign_in_device_code(sys.argv[1], 'http://127.0.0.1:9/common', 'User.Read', lambda code: None, timeout_seconds=5)\n"
                "except tokencache.TokenCacheError as error:\n"
                "    print(error.name)\n")
        run = subprocess.run([sys.executable, "-c", code, CLIENT_A], env=env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), ["TOKENCACHE_E_NETWORK"])


class LibraryPathTests(unittest.TestCase):
    """#44 item 6: TOKENCACHE_LIBRARY is ignored when the process runs setuid or setgid."""

    def test_the_variable_is_used_normally_and_ignored_when_privileged(self):
        from unittest import mock
        with mock.patch.dict(os.environ, {"TOKENCACHE_LIBRARY": "/tmp/attacker/libtokencache.so.0"}):
            self.assertEqual(tokencache._library_path(), "/tmp/attacker/libtokencache.so.0")
            with mock.patch("os.geteuid", return_value=os.getuid() + 1):
                self.assertEqual(tokencache._library_path(), "libtokencache.so.0")
            with mock.patch("os.getegid", return_value=os.getgid() + 1):
                self.assertEqual(tokencache._library_path(), "libtokencache.so.0")


class SecureExecutionTests(unittest.TestCase):
    """#57: a binary with file capabilities runs in secure-execution mode (AT_SECURE) with its uid
    and gid unchanged; TOKENCACHE_LIBRARY must be ignored there too. A copy of Python given
    cap_net_bind_service, run by uid 65534 (root gains no capability from a file, so no AT_SECURE)."""

    LOADER = ("import sys\n"
              "sys.path.insert(0, sys.argv[1])\n"
              "try:\n"
              "    import tokencache\n"
              "    print('LOADED', tokencache._library_path())\n"
              "except OSError as error:\n"
              "    print('NOT-LOADED', error)\n")

    def run_as_nobody(self, python, work):
        env = {"PATH": "/usr/bin:/bin", "TOKENCACHE_LIBRARY": os.path.join(work, "attacker", "libtokencache.so.0")}
        run = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c", self.LOADER, work],
                             env=env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        return run.stdout

    def test_a_file_capability_python_ignores_the_variable(self):
        import shutil
        import tempfile
        if os.geteuid() != 0 or not shutil.which("setcap", path="/usr/sbin:/sbin") or not shutil.which("setpriv"):
            self.skipTest("needs root, setcap and setpriv")
        work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, work, True)
        os.chmod(work, 0o755)
        shutil.copytree(os.path.dirname(tokencache.__file__), os.path.join(work, "tokencache"))
        for name in ("plain", "capable"):
            shutil.copy(os.path.realpath(sys.executable), os.path.join(work, name))
        subprocess.run(["/usr/sbin/setcap", "cap_net_bind_service+ep", os.path.join(work, "capable")], check=True)
        # Without capabilities the variable is used: the attacker's path is the one tried.
        self.assertIn(os.path.join(work, "attacker"), self.run_as_nobody(os.path.join(work, "plain"), work))
        # With them, the system's library is, though uid == euid and gid == egid.
        capable = self.run_as_nobody(os.path.join(work, "capable"), work)
        self.assertNotIn("attacker", capable)
        self.assertTrue(capable.startswith(("LOADED libtokencache.so.0", "NOT-LOADED libtokencache.so.0")), capable)


class ThreadSafetyTests(unittest.TestCase):
    """A Store and its Watches shared by threads (#34 item 4)."""

    def setUp(self):
        self.store = open_empty_store(self)
        self.store.save_response(CLIENT_A, AUTHORITY, "User.Read", response("race"))

    def test_close_while_threads_call_waits_for_them_and_later_calls_raise_closed_error(self):
        rounds = int(os.environ.get("TOKENCACHE_PYTHON_RACE_ROUNDS", "100"))
        started = time.monotonic()
        child = subprocess.run([sys.executable, "-c", RACE_CHILD, GROUP, CLIENT_A, USERNAME, str(rounds), "12"],
                               capture_output=True, text=True, timeout=600)
        signal = f" (killed by signal {-child.returncode})" if child.returncode < 0 else ""
        self.assertEqual(child.returncode, 0, f"race child failed{signal}: {child.stdout}{child.stderr[-2000:]}")
        print(f"close-vs-call race: {rounds} rounds x 12 threads in {time.monotonic() - started:.1f} s: {child.stdout.strip()}",
              file=sys.stderr)

    def test_close_from_inside_a_watch_callback_is_refused_not_a_deadlock(self):
        store = tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE)
        self.addCleanup(store.close)
        outcome, done = [], threading.Event()

        def on_change(accounts, error):
            if done.is_set():
                return
            for close in (store.close, watch.stop):
                try:
                    close()
                    outcome.append("returned")
                except tokencache.TokenCacheError as error:
                    outcome.append(error.message)
            done.set()

        watch = None
        watch = store.watch_accounts(CLIENT_A, lambda accounts, error: (watch is not None) and on_change(accounts, error),
                                     interval_ms=10)
        self.assertTrue(done.wait(5))
        self.assertEqual(len(outcome), 2)
        self.assertIn("inside one of its watches' callbacks", outcome[0])
        self.assertIn("inside one of its own calls or callbacks", outcome[1])
        store.close()  # from here: stops the watch, then closes
        with self.assertRaises(tokencache.ClosedError):
            store.accounts()


class SignInTests(unittest.TestCase):
    """tokencache_sign_in_device_code and tokencache_sign_in_browser at the local identity provider."""

    def setUp(self):
        self.store = open_empty_store(self)
        self.authority, self.control = start_idp(self)
        self.control("/control", {"sign_in_user": {"uid": UID, "utid": TENANT, "username": USERNAME},
                                  "family_clients": {CLIENT_A: "1"}})

    def sign_in(self, answer, **options):
        codes, caller = [], threading.get_ident()

        def on_code(code):
            codes.append(code)
            self.assertEqual(threading.get_ident(), caller)  # delivered on the calling thread
            if answer:
                self.control("/control", {answer: code.user_code})
        try:
            return self.store.sign_in_device_code(CLIENT_A, self.authority, ["User.Read"], on_code=on_code, **options)
        finally:
            self.assertEqual(len(codes), 1)
            self.assertTrue(codes[0].user_code)
            self.assertIn(codes[0].user_code, codes[0].message)
            self.assertTrue(codes[0].verification_uri.endswith("/device"), codes[0])

    def test_device_code_sign_in_is_saved_for_the_group(self):
        token = self.sign_in("approve_device")
        self.assertFalse(token.is_from_cache)
        self.assertEqual((token.home_account_id, token.username), (HOME, USERNAME))
        self.assertTrue(token.access_token.startswith("at-issued-"), token)
        self.assertEqual([a.username for a in self.store.accounts(CLIENT_A)], [USERNAME])
        self.assertEqual([a.home_account_id for a in self.store.accounts(CLIENT_B)], [HOME])  # family: B sees it too
        found = self.store.find_access_token(CLIENT_A, USERNAME, "User.Read")
        self.assertEqual(found.access_token, token.access_token)

    def test_device_code_denied(self):
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.sign_in("deny_device")
        self.assertEqual(caught.exception.code, tokencache.ACCESS_DENIED)
        self.assertEqual(caught.exception.name, "TOKENCACHE_E_ACCESS_DENIED")
        self.assertEqual(self.store.accounts(), [])

    def test_device_code_timeout(self):
        # The provider's code lives 600 s: only timeout_seconds can end the wait with this reason
        # (when it ends is the library's, tested on a manual clock: DeviceCodeSignInTests/callerTimeout).
        with self.assertRaises(tokencache.TokenCacheError) as caught:
            self.sign_in(None, timeout_seconds=2)
        self.assertEqual(caught.exception.code, tokencache.TIMED_OUT)
        self.assertEqual(caught.exception.reason, "device_code_timed_out")
        self.assertEqual(self.store.accounts(), [])

    def test_device_code_needs_a_callback(self):
        with self.assertRaises(TypeError):
            self.store.sign_in_device_code(CLIENT_A, self.authority, "User.Read", on_code=None)

    def test_close_waits_for_a_sign_in_in_flight(self):
        # The device code sign-in is inside the C call while on_code runs (on the calling thread).
        store = tokencache.Store.open(GROUP, tokencache.Backend.SECRET_SERVICE)
        entered, release, outcome = threading.Event(), threading.Event(), []

        def on_code(code):
            entered.set()
            release.wait(5)
            self.control("/control", {"deny_device": code.user_code})

        def sign_in():
            try:
                store.sign_in_device_code(CLIENT_A, self.authority, "User.Read", on_code=on_code)
            except tokencache.TokenCacheError as error:
                outcome.append(error.code)

        signing_in = threading.Thread(target=sign_in)
        signing_in.start()
        self.assertTrue(entered.wait(10))
        closer = threading.Thread(target=store.close)
        closer.start()
        closer.join(0.5)
        self.assertTrue(closer.is_alive(), "close returned while a sign-in was in flight")
        with self.assertRaises(tokencache.ClosedError):  # closing: no new call starts
            store.accounts()
        release.set()
        signing_in.join(30)
        closer.join(5)
        self.assertFalse(closer.is_alive())
        self.assertEqual(outcome, [tokencache.ACCESS_DENIED])  # the sign-in ended on its own terms

    def test_device_code_callback_exception_is_raised_after_the_sign_in(self):
        def on_code(code):
            self.control("/control", {"deny_device": code.user_code})
            raise RuntimeError("from on_code")
        with self.assertRaisesRegex(RuntimeError, "from on_code"):
            self.store.sign_in_device_code(CLIENT_A, self.authority, "User.Read", on_code=on_code)

    def sign_in_browser_in_child(self, display, path_prefix=""):
        """sign_in_browser in a child process with DISPLAY set or not, a session bus address that leads
        nowhere (so no desktop portal), the encrypted file backend in a scratch home, and path_prefix
        before PATH. Prints the username of the token and the accounts, or the error's name and hint."""
        import tempfile
        home = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", home])
        env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
        env.update(DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent/bus", HOME=home, XDG_DATA_HOME=f"{home}/data",
                   PATH=path_prefix + os.environ["PATH"])
        if display:
            env["DISPLAY"] = display
        script = """if True:
            import sys, tokencache
            store = tokencache.Store.open(sys.argv[1], tokencache.Backend.FILE)
            try:
                token = store.sign_in_browser(sys.argv[2], sys.argv[3], "User.Read", login_hint="dave@contoso.com",
                                              timeout_seconds=120)
                found = store.find_access_token(sys.argv[2], token.username, "User.Read")
                print(token.username, token.is_from_cache, found.access_token == token.access_token)
                print(" ".join(account.username for account in store.accounts(sys.argv[2])))
            except tokencache.TokenCacheError as error:
                print(error.name)
                print(error.hint)
        """
        start = time.monotonic()
        child = subprocess.run([sys.executable, "-c", script, GROUP, CLIENT_A, self.authority], env=env, capture_output=True,
                               text=True, timeout=90)
        self.assertEqual(child.returncode, 0, child.stderr)
        return child.stdout.splitlines()[:2], time.monotonic() - start

    def test_browser_without_display_or_portal_is_unavailable_at_once(self):
        (name, hint), elapsed = self.sign_in_browser_in_child(display=None)
        self.assertEqual(name, "TOKENCACHE_E_BROWSER_UNAVAILABLE")
        self.assertIn("tokencache_sign_in_device_code", hint)  # the C name, not the Swift one (a wait for the timeout would be TIMED_OUT)
        print(f"browser unavailable after {elapsed:.1f} s", file=sys.stderr)

    def test_browser_sign_in_through_xdg_open(self):
        # No portal, but a display and an xdg-open on PATH that plays browser and user: it opens the
        # start page (redirected to the authorization URL), submits the identity provider's login form and follows the redirect to
        # the loopback listener.
        import tempfile
        bin_dir = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", bin_dir])
        with open(f"{bin_dir}/xdg-open", "w") as opener:
            opener.write(f"""#!{sys.executable}
import html, re, sys, urllib.parse, urllib.request
response = urllib.request.urlopen(sys.argv[1])  # the start page redirects to the authorization URL
url, page = response.geturl(), response.read().decode()
action = html.unescape(re.search(r'action="([^"]*)"', page).group(1))
fields = html.unescape(re.search(r'name="fields" value="([^"]*)"', page).group(1))
form = urllib.parse.urlencode({{"fields": fields, "username": "{USERNAME}", "choice": "signin"}}).encode()
urllib.request.urlopen(urllib.parse.urljoin(url, action), data=form).read()
""")
        os.chmod(f"{bin_dir}/xdg-open", 0o755)
        (signed_in, accounts), elapsed = self.sign_in_browser_in_child(display=":99", path_prefix=bin_dir + ":")
        self.assertEqual(signed_in, f"{USERNAME} False True")
        self.assertEqual(accounts, USERNAME)
        print(f"browser sign-in through xdg-open: {elapsed:.1f} s", file=sys.stderr)


class NativeAuthTests(unittest.TestCase):
    """tokencache_native_* at the local stand-in of the native-auth API (Fixtures/native_auth.py)."""

    OTP_USER, PASSWORD_USER, PASSWORD = "olivia@contoso.com", "paul@contoso.com", "Correct-horse-42"

    def setUp(self):
        import tempfile
        self.store = open_empty_store(self)
        self.authority, self.control = start_idp(self)
        self.mailbox = tempfile.TemporaryDirectory()
        self.addCleanup(self.mailbox.cleanup)
        self.control("/control", {"native_mailbox": self.mailbox.name, "native_users": {
            self.OTP_USER: {"uid": UID}, self.PASSWORD_USER: {"uid": "9a55a000-0000-0000-0000-000000000002", "password": self.PASSWORD}}})

    def code(self, email):
        with open(os.path.join(self.mailbox.name, email)) as mailbox:
            return mailbox.read().split()[-1]

    def test_email_code_sign_in_wrong_then_right_on_the_calling_thread(self):
        asked, caller = [], threading.get_ident()

        def prompt(what, detail):
            self.assertEqual(threading.get_ident(), caller)
            asked.append((what, detail))
            return "73000001" if len(asked) == 1 else self.code(self.OTP_USER)
        token = self.store.native_sign_in(CLIENT_A, self.authority, "User.Read", self.OTP_USER, prompt)
        self.assertEqual(asked, [(tokencache.NativePrompt.CODE, "o****@contoso.com")] * 2)
        self.assertEqual((token.home_account_id, token.username), (HOME, self.OTP_USER))
        self.assertEqual([a.username for a in self.store.accounts(CLIENT_A)], [self.OTP_USER])

    def test_password_sign_in_and_errors(self):
        token = self.store.native_sign_in(CLIENT_A, self.authority, "User.Read", self.PASSWORD_USER,
                                          lambda what, detail: self.PASSWORD if what == tokencache.NativePrompt.PASSWORD else None)
        self.assertEqual(token.username, self.PASSWORD_USER)
        with self.assertRaises(tokencache.TokenCacheError) as raised:
            self.store.native_sign_in(CLIENT_A, self.authority, "User.Read", self.PASSWORD_USER, lambda w, d: None,
                                      password="Wrong-password-1")
        self.assertEqual(raised.exception.code, tokencache.INVALID_CREDENTIALS)
        with self.assertRaises(tokencache.TokenCacheError) as raised:
            self.store.native_sign_in(CLIENT_A, self.authority, "User.Read", self.OTP_USER, lambda w, d: None)
        self.assertEqual(raised.exception.code, tokencache.CANCELLED)

    def test_sign_up_then_reset_password(self):
        self.control("/control", {"native_signup_attributes": [{"name": "extension_age", "type": "string", "required": True,
                                                                 "options": {"regex": "^[0-9]+$"}}]})
        email = "py.user@contoso.com"

        def prompt(what, detail):
            if what == tokencache.NativePrompt.CODE:
                return self.code(email)
            return "42" if (what, detail) == (tokencache.NativePrompt.ATTRIBUTE, "extension_age") else None
        token = self.store.native_sign_up(CLIENT_A, self.authority, "User.Read", email, prompt, password="Strong-pass-77",
                                          attributes={"displayName": "Py User"})
        self.assertEqual(token.username, email)
        with self.assertRaises(tokencache.TokenCacheError) as raised:
            self.store.native_sign_up(CLIENT_A, self.authority, "User.Read", email, prompt, password="Strong-pass-77")
        self.assertEqual(raised.exception.code, tokencache.USER_ALREADY_EXISTS)
        token = self.store.native_reset_password(CLIENT_A, self.authority, "User.Read", email, "Brand-new-pass-9", prompt)
        self.assertEqual(token.username, email)



class TPMKeySourceTests(unittest.TestCase):
    """The encrypted file keyed by a TPM (#49), against a real software TPM (swtpm)."""

    def start_swtpm(self):
        import socket
        import tempfile
        import time
        state = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", state])
        for _ in range(20):
            with socket.socket() as first, socket.socket() as second:
                first.bind(("127.0.0.1", 0))
                port = first.getsockname()[1]
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            swtpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--server", f"type=tcp,port={port},bindaddr=127.0.0.1",
                                      "--ctrl", f"type=tcp,port={port + 1},bindaddr=127.0.0.1", "--tpmstate", f"dir={state}",
                                      "--flags", "not-need-init,startup-clear"])
            for _ in range(1000):  # waits for it to listen (at most 10 s), not a timing under test
                if swtpm.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", port + 1)).close()
                    self.addCleanup(swtpm.wait)
                    self.addCleanup(swtpm.kill)
                    return f"swtpm:host=127.0.0.1,port={port}"
                except OSError:
                    time.sleep(0.01)
            swtpm.kill()
            swtpm.wait()
        self.fail("swtpm did not start")

    def test_reads_the_cache_the_cli_sealed_to_the_tpm(self):
        import tempfile
        cli = os.environ.get("TOKENCACHE_CLI")
        self.assertTrue(cli, "TOKENCACHE_CLI names the tokencache binary")
        home = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", home])
        environment = {"XDG_DATA_HOME": f"{home}/data", "XDG_CONFIG_HOME": f"{home}/config", "TOKENCACHE_TPM_TCTI": self.start_swtpm()}
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update(environment)
        subprocess.run([cli, "save", "--backend", "file", "--key-source", "tpm", "--group", GROUP, "--client", CLIENT_A,
                        "--authority", AUTHORITY, "--scopes", "User.Read"], input=response("tpm"), text=True,
                       capture_output=True, check=True)
        self.assertTrue(os.path.exists(f"{home}/data/tokencache/cache.key.tpm"))
        store = tokencache.Store.open(GROUP, tokencache.Backend.FILE)
        self.addCleanup(store.close)
        self.assertEqual(store.find_access_token(CLIENT_A, USERNAME, "User.Read").access_token, "at-py-tpm")


class SessionKeyTests(unittest.TestCase):
    """A passphrase-protected encrypted file unlocked for the login session (#49): a Python app
    of the session reads it without a passphrase."""

    def test_app_reads_without_a_passphrase_after_unlock(self):
        import tempfile
        cli = os.environ.get("TOKENCACHE_CLI")
        self.assertTrue(cli, "TOKENCACHE_CLI names the tokencache binary")
        home = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", home])
        passphrase = os.path.join(home, "passphrase")
        with open(os.open(passphrase, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write("a session passphrase\n")
        environment = dict(os.environ, XDG_DATA_HOME=f"{home}/data", XDG_CONFIG_HOME=f"{home}/config", CLI=cli, GROUP=GROUP)
        subprocess.run([cli, "save", "--backend", "file", "--group", GROUP, "--client", CLIENT_A, "--authority", AUTHORITY,
                        "--scopes", "User.Read"], input=response("session"), text=True, capture_output=True, check=True,
                       env=dict(environment, TOKENCACHE_PASSPHRASE_FILE=passphrase))
        app = ("import tokencache, sys\n"
               "store = tokencache.Store.open(sys.argv[1], tokencache.Backend.FILE)\n"
               f"print(store.find_access_token({CLIENT_A!r}, {USERNAME!r}, 'User.Read').access_token)\n")
        # One login session of its own (keyctl session): unlock, then the app, then lock.
        script = ('TOKENCACHE_PASSPHRASE_FILE="$1" "$CLI" unlock --file --group "$GROUP" --timeout 1h >/dev/null || exit 1\n'
                  '"$2" -c "$3" "$GROUP" < /dev/null; status=$?\n"$CLI" lock --file > /dev/null\n'
                  '"$2" -c "$3" "$GROUP" < /dev/null 2>/dev/null && echo "READ AFTER LOCK"\nexit $status\n')
        done = subprocess.run(["keyctl", "session", "-", "bash", "-c", script, "session", passphrase, sys.executable, app],
                              env=environment, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split("\n")[-2], "at-py-session", done.stdout)
        self.assertNotIn("READ AFTER LOCK", done.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
