"""#62's end-to-end test: MSAL Python through `tokencache broker` forwarding to the token keeper gets a token.
Run by scripts/test-broker.sh inside scripts/with-broker-harness.sh (root; private mount and network
namespaces; login.microsoftonline.com is the local identity provider over TLS with a test CA).

- The keeper runs as root from a root-owned copy of the CLI in a root-owned 0755 directory under /opt
  (it trusts only its own program as forwarder and identifies apps by root-owned executables).
- Alice and Bob are real users (useradd; removed at the end, also on failure). Alice signs in with
  `tokencache login --device-code` (approved at the provider) to her own local cache of the group, then
  enrols it with the keeper, which removes her copy.
- Each user has her own session bus (dbus-daemon, as the user, nothing activatable) with gnome-keyring, and
  `tokencache broker` forwarding to the keeper (TOKENCACHE_AGENT_SOCK, TOKENCACHE_AGENT_UID=0). The runtime
  keeps its accounts in the Secret Service: without one, the sign-in works but a later silent call gets None.
- MSAL Python (msal[broker], the harness's venv bind-mounted at a root-owned path the users can reach)
  runs msal_broker_app.py as the user.
Checked: Alice's app gets the token the provider issued to the keeper's refresh, from the broker; the keeper's
log and audit log name the app's interpreter via the broker; no refresh token the provider issued is in
Alice's home, in the brokers' output, in MSAL Python's output or its cache; a client the apps file does not
name gets no token; Bob, through his own broker and the same keeper, gets nothing of Alice's.

Environment: TOKENCACHE_CLI, TOKENCACHE_TEST_PYTHON, the harness's TOKENCACHE_TEST_IDP and REQUESTS_CA_BUNDLE.
"""
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ["TOKENCACHE_CLI"]
PYTHON = os.environ["TOKENCACHE_TEST_PYTHON"]
IDP = os.environ["TOKENCACHE_TEST_IDP"]
CA_BUNDLE = os.environ.get("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
TENANT = "72f988bf-0000-0000-0000-00000000b0b1"
AUTHORITY = "https://login.microsoftonline.com/" + TENANT
ALICE = {"uid": "a11ce000-0000-0000-0000-000000000062", "utid": TENANT, "username": "alice@contoso.com", "name": "Alice"}
ALICE_HOME_ACCOUNT_ID = ALICE["uid"] + "." + TENANT
GROUP = "com.example.keeper-fwd"
CLIENT = "04b07795-0000-0000-0000-0000000f0062"     # the apps file allows it
UNLISTED = "1950a258-0000-0000-0000-0000000f0062"   # of the same family, not in the apps file
BROKER_NAME = "com.microsoft.identity.broker1"
SECRETS_NAME = "org.freedesktop.secrets"
STARTUP_SECONDS = 30

# A session bus of the user's own, on which nothing can be started by activation (no service directory
# with anything in it): gnome-keyring and the broker are started by the test, or calls fail.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>%s</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def idp(path, body=None):
    request = urllib.request.Request(IDP + path, data=json.dumps(body).encode() if body is not None else None,
                                     method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


def grants():
    return idp("/stats")["grants"]


def issued_refresh_tokens():
    return idp("/stats")["issued_refresh_tokens"]


def issued_access_token(grant):
    """The access token the provider issued with a grant's refresh token: they share the counter."""
    return "at-issued-" + grant["issued"].rsplit("-", 1)[1]


def run(arguments, timeout=60, **kwargs):
    return subprocess.run(arguments, capture_output=True, text=True, timeout=timeout, **kwargs)


def wait_until(what, predicate, process=None, describe=lambda: "", seconds=STARTUP_SECONDS):
    """Polls `predicate` until it holds (readiness only), failing at the deadline or when `process` exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError("%s: the process exited (%s) first: %s" % (what, process.returncode, describe()))
        time.sleep(0.05)
    raise AssertionError("%s: not within %d s: %s" % (what, seconds, describe()))


def read(path):
    with open(path, errors="replace") as file:
        return file.read()


def stop(process, seconds=10):
    """SIGTERM to a process the test started (a Popen), SIGKILL when it does not go."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_pid(pid, seconds=10):
    """The same for a process the test started that is not its child (a forked bus daemon)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.path.exists("/proc/%d" % pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def mounted(path):
    """Whether something is mounted at `path` (/proc/self/mountinfo: a bind mount of a directory on the same
    file system is one os.path.ismount does not see)."""
    with open("/proc/self/mountinfo") as file:
        return any(line.split()[4] == path for line in file)


def home_text(home):
    """Every file under a home, its bytes as text (a refresh token is ASCII)."""
    text = []
    for directory, _, files in os.walk(home):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as file:
                    text.append(file.read().decode("latin-1"))
    return "\n".join(text)


class User:
    """A real user made with useradd for this run (removed with userdel), and what runs as her."""

    def __init__(self, prefix, scratch):
        self.name = prefix + secrets.token_hex(3)
        added = run(["useradd", "--create-home", "--user-group", "--shell", "/bin/sh", self.name])
        if added.returncode != 0:
            raise AssertionError("useradd %s: %s" % (self.name, added.stderr))
        try:
            self.set_up(scratch)
        except BaseException:
            run(["userdel", "--remove", "--force", self.name])
            raise

    def set_up(self, scratch):
        entry = pwd.getpwnam(self.name)
        self.uid, self.gid, self.home = entry.pw_uid, entry.pw_gid, entry.pw_dir
        # Her XDG_RUNTIME_DIR (gnome-keyring's control socket) and her processes' trace log, in the run's
        # TMPDIR, which scripts/test-broker.sh scans for secrets.
        self.runtime = os.path.join(scratch, "run-" + self.name)
        os.mkdir(self.runtime, 0o700)
        os.chown(self.runtime, self.uid, self.gid)
        descriptor, self.trace = tempfile.mkstemp(prefix="trace-%s-" % self.name, suffix=".log")
        os.fchown(descriptor, self.uid, self.gid)
        os.close(descriptor)
        self.bus = None
        self.bus_pid = None
        self.keyring = None
        self.broker = None
        self.broker_log = None

    def environment(self, extra=None):
        """A login's environment: her home, no desktop session, nothing of the test runner's."""
        environment = {"HOME": self.home, "USER": self.name, "LOGNAME": self.name, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                       "NO_COLOR": "1", "XDG_RUNTIME_DIR": self.runtime, "TOKENCACHE_LOG_FILE": self.trace}
        if self.bus:
            environment["DBUS_SESSION_BUS_ADDRESS"] = self.bus
        environment.update(extra or {})
        return environment

    def command(self, arguments):
        return ["setpriv", "--reuid", str(self.uid), "--regid", str(self.gid), "--init-groups", "--", *arguments]

    def run(self, arguments, extra=None, timeout=60, **kwargs):
        return subprocess.run(self.command(arguments), capture_output=True, text=True, timeout=timeout,
                              env=self.environment(extra), cwd=self.home, **kwargs)

    def popen(self, arguments, extra=None, **kwargs):
        return subprocess.Popen(self.command(arguments), env=self.environment(extra), cwd=self.home, **kwargs)

    def has_owner(self, name):
        result = self.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                           "org.freedesktop.DBus.NameHasOwner", "string:" + name])
        return "boolean true" in result.stdout

    def start_session(self, config, broker_program, keeper_socket):
        """Her own session bus, gnome-keyring on it, and her `tokencache broker` forwarding to the keeper."""
        started = self.run(["dbus-daemon", "--config-file=" + config, "--fork", "--print-address=1", "--print-pid=1"],
                           stdin=subprocess.DEVNULL)
        lines = started.stdout.split()
        if started.returncode != 0 or len(lines) < 2:
            raise AssertionError("dbus-daemon as %s: %s%s" % (self.name, started.stdout, started.stderr))
        self.bus, self.bus_pid = lines[0], int(lines[1])
        # As scripts/with-test-keyring.sh starts it, unlocked with the test password (in no argument).
        keyring_log = os.path.join(self.runtime, "keyring.log")
        with open(keyring_log, "w") as log:
            self.keyring = self.popen(["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
                                      stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        self.keyring.stdin.write(b"test-password")
        self.keyring.stdin.close()
        wait_until("gnome-keyring as %s" % self.name, lambda: self.has_owner(SECRETS_NAME), self.keyring, lambda: read(keyring_log))
        descriptor, self.broker_log = tempfile.mkstemp(prefix="broker-%s-" % self.name, suffix=".log")
        with os.fdopen(descriptor, "w") as log:
            self.broker = self.popen([broker_program, "broker"], {"TOKENCACHE_AGENT_SOCK": keeper_socket, "TOKENCACHE_AGENT_UID": "0"},
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_until("tokencache broker as %s" % self.name, lambda: "serving" in read(self.broker_log), self.broker,
                   lambda: read(self.broker_log))
        if not self.has_owner(BROKER_NAME):
            raise AssertionError("the broker said it serves but owns no name: " + read(self.broker_log))

    def stop_session(self):
        stop(self.broker)
        stop(self.keyring)
        if self.bus_pid:
            stop_pid(self.bus_pid)

    def remove(self):
        self.stop_session()
        run(["userdel", "--remove", "--force", self.name])


class KeeperForwarding(unittest.TestCase):
    """One keeper, Alice and Bob for all cases; the cases run in order (unittest sorts by name) and build
    on each other's state."""

    @classmethod
    def setUpClass(cls):
        # MSALRuntime keeps named semaphores in /dev/shm (sem.UUID:HASH, mode 0700, left behind by a run that was
        # killed): another user's of the same name makes Alice's runtime fail to write its cache ("Error while
        # creating system mutex", EACCES), and her silent call then finds no account. The harness's private mount
        # namespace gets an empty /dev/shm, so no earlier run on this machine decides the outcome.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tokencache-test-shm", "/dev/shm"], check=True)
        cls.alice = cls.bob = cls.keeper = None
        cls.opt = tempfile.mkdtemp(prefix="tckf-", dir="/opt")
        cls.addClassCleanup(cls.remove_opt)
        cls.root = tempfile.mkdtemp(prefix="tckf-", dir="/tmp")
        cls.addClassCleanup(shutil.rmtree, cls.root, True)
        cls.addClassCleanup(cls.stop_everything)
        for directory in (cls.opt, cls.root):
            os.chmod(directory, 0o755)
        cls.program = os.path.join(cls.opt, "tokencache")
        shutil.copyfile(CLI, cls.program)
        os.chmod(cls.program, 0o755)
        shutil.copyfile(os.path.join(HERE, "msal_broker_app.py"), os.path.join(cls.opt, "msal_broker_app.py"))
        os.chmod(os.path.join(cls.opt, "msal_broker_app.py"), 0o644)
        os.mkdir(os.path.join(cls.opt, "dbus-services"), 0o755)
        cls.bus_config = os.path.join(cls.opt, "session.conf")
        with open(cls.bus_config, "w") as file:
            file.write(BUS_CONFIG % os.path.join(cls.opt, "dbus-services"))
        os.chmod(cls.bus_config, 0o644)

        # The venv, where the users can reach it (the repository's path may not be traversable by them): bind-mounted
        # read-only in the harness's private mount namespace (it vanishes with it), at a root-owned path.
        prefix = run([PYTHON, "-c", "import sys; print(sys.prefix)"]).stdout.strip()
        cls.venv = os.path.join(cls.opt, "venv")
        os.mkdir(cls.venv, 0o755)
        for mount in (["mount", "--bind", prefix, cls.venv], ["mount", "-o", "remount,bind,ro", cls.venv]):
            mounted = run(mount)
            if mounted.returncode != 0:
                raise AssertionError("%s: %s" % (" ".join(mount), mounted.stderr))
        cls.python = os.path.join(cls.venv, "bin", "python")
        # What the keeper sees as the app: the interpreter (/proc/PID/exe), whatever script it runs.
        cls.interpreter = os.path.realpath(cls.python)

        # The keeper, as root: its socket, state and apps directories (root's, 0755).
        cls.socket = os.path.join(cls.root, "run", "keeper.sock")
        cls.state = os.path.join(cls.root, "state")
        cls.apps = os.path.join(cls.root, "apps.d")
        for directory in (os.path.dirname(cls.socket), cls.apps):
            os.mkdir(directory, 0o755)
        # TEST ONLY: an interpreter in apps.d allows every script it runs (any program of the user's could run
        # python3 with a script of its own and get the group's tokens). Here it stands for MSAL Python's app.
        with open(os.path.join(cls.apps, "msal-python.json"), "w") as file:
            json.dump({"executable": cls.interpreter, "groups": [GROUP], "clientIDs": [CLIENT]}, file)
        os.chmod(os.path.join(cls.apps, "msal-python.json"), 0o644)
        descriptor, cls.keeper_log = tempfile.mkstemp(prefix="keeper-", suffix=".log")
        os.close(descriptor)
        environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH")}
        with open(cls.keeper_log, "w") as log:
            cls.keeper = subprocess.Popen([cls.program, "keeper", "--socket", cls.socket, "--state-dir", cls.state, "--apps-dir", cls.apps, "--broker-forwarding"],
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=environment)
        wait_until("the keeper", lambda: "serving at" in read(cls.keeper_log), cls.keeper, lambda: read(cls.keeper_log))

        scratch = os.environ.get("TMPDIR", "/tmp")
        cls.alice = User("tckfa", scratch)
        cls.bob = User("tckfb", scratch)
        # (pymsalruntime is imported by the apps, on a bus: without one its start-up fails.)
        check = cls.alice.run([cls.python, "-c", "import sys, msal; print(sys.prefix)"])
        if check.returncode != 0 or check.stdout.strip() != cls.venv:
            raise AssertionError("the venv at %s does not work for Alice: %s%s" % (cls.venv, check.stdout, check.stderr))

        cls.login_refresh_token = cls.sign_in_and_enroll_alice()
        cls.alice.start_session(cls.bus_config, cls.program, cls.socket)
        cls.bob.start_session(cls.bus_config, cls.program, cls.socket)

    @classmethod
    def sign_in_and_enroll_alice(cls):
        """As Alice: `tokencache login --device-code` to her own cache of GROUP (approved at the provider as she
        would), then `tokencache keeper --enroll`. Access tokens issued from now on live 2 minutes, which MSAL, its
        runtime and tokencache all take as expired (under 5 minutes left): every token an app gets later is one
        the keeper redeemed a refresh token for."""
        idp("/control", {"sign_in_user": ALICE, "device_interval": 1, "expires_in": 120, "family_clients": {CLIENT: "1", UNLISTED: "1"}})
        local = ["--backend", "file", "--group", GROUP]
        login = cls.alice.popen([cls.program, "login", "--device-code", "--client", CLIENT, "--authority", AUTHORITY, "--scopes", "User.Read", *local],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        code = None
        for line in login.stderr:
            found = re.search(r"enter the code (\w+)", line)
            if found:
                code = found.group(1)
                break
        if not code:
            login.kill()
            raise AssertionError("tokencache login showed no device code")
        idp("/control", {"approve_device": code})
        out, err = login.communicate(timeout=60)
        assert login.returncode == 0, "tokencache login as Alice failed: " + err
        assert ALICE["username"] in out, out
        refresh_token = issued_refresh_tokens()[-1]
        enrolled = cls.alice.run([cls.program, "keeper", "--enroll", "--socket", cls.socket, *local])
        assert enrolled.returncode == 0 and "Enrolled group" in enrolled.stdout, enrolled.stdout + enrolled.stderr + read(cls.keeper_log)
        listed = cls.alice.run([cls.program, "list", *local])
        assert ALICE["username"] not in listed.stdout, "her copy is removed after the keeper read it back: " + listed.stdout
        return refresh_token

    @classmethod
    def stop_everything(cls):
        for user in (cls.alice, cls.bob):
            if user:
                user.remove()
        stop(cls.keeper)

    @classmethod
    def remove_opt(cls):
        """The copies under /opt, once the venv is unmounted (never a recursive delete through the mount)."""
        venv = os.path.join(cls.opt, "venv")
        while mounted(venv):
            unmounted = run(["umount", venv])
            if unmounted.returncode != 0:
                raise AssertionError("could not unmount %s (left in place): %s" % (venv, unmounted.stderr))
        if os.path.isdir(venv):
            os.rmdir(venv)  # empty once unmounted; fails (and keeps everything) otherwise
        shutil.rmtree(cls.opt)

    def app(self, user, client, action, **request):
        """One run of msal_broker_app.py as `user`: (its pid, its answer, what it printed)."""
        request = dict(request, client=client, authority=AUTHORITY, action=action,
                       cache=os.path.join(user.home, "msal-cache-%s.json" % client))
        process = user.popen([self.python, os.path.join(self.opt, "msal_broker_app.py"), json.dumps(request)],
                             {"REQUESTS_CA_BUNDLE": CA_BUNDLE}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out, err = process.communicate(timeout=120)
        self.printed.append(out + err)
        if process.returncode != 0:
            raise AssertionError("msal_broker_app.py %s as %s failed (%d): %s" % (action, user.name, process.returncode, err[-3000:]))
        return process.pid, json.loads(out), out + err

    def keeper_lines(self, user, pid, op):
        """The keeper's log lines (its standard error) for app `pid` of `user` through her broker, operation `op`."""
        prefix = "%s (pid %d, uid %d) via broker pid %d: %s " % (self.interpreter, pid, user.uid, user.broker.pid, op)
        return [line for line in read(self.keeper_log).splitlines() if prefix in line]

    def audit(self, user):
        """The user's audit log as root reads it (`keeper --log --uid U --state-dir D --json`)."""
        audit = run([self.program, "keeper", "--log", "--uid", str(user.uid), "--state-dir", self.state, "--json"])
        self.assertEqual(audit.returncode, 0, audit.stdout + audit.stderr)
        return json.loads(audit.stdout)["entries"]

    printed = []  # everything MSAL Python printed, for test_e

    def test_a_alice_msal_app_gets_her_token_through_the_broker_from_the_keeper(self):
        self.assertIn("token keeper", read(self.alice.broker_log), "the broker says it forwards to the keeper")
        before = len(grants())
        pid, answer, _ = self.app(self.alice, CLIENT, "sign_in")
        result = answer["result"]
        self.assertEqual(result.get("token_source"), "broker", {k: v for k, v in result.items() if k != "access_token"})
        after = grants()
        self.assertEqual(len(after), before + 1, "the keeper refreshed the expired token once, at the issuer")
        redeemed = after[-1]
        self.assertEqual((redeemed["client_id"], redeemed["redeemed"], redeemed["outcome"], redeemed["sdk"]),
                         (CLIENT, self.login_refresh_token, "ok", "-"),
                         "tokencache (the keeper) redeemed the refresh token Alice's sign-in left with it")
        # (assertTrue: a failure prints no token.)
        self.assertTrue(result.get("access_token") == issued_access_token(redeemed), "the app got the token the provider issued")
        type(self).first_refresh = redeemed

        token = self.keeper_lines(self.alice, pid, "forward token")
        self.assertEqual(len(token), 1, "the keeper's log names the app's interpreter via the broker:\n" + read(self.keeper_log))
        self.assertIn("group %s client %s scopes User.Read account %s -> granted" % (GROUP, CLIENT, ALICE_HOME_ACCOUNT_ID), token[0])
        entries = [e for e in self.audit(self.alice) if e.get("pid") == pid and e.get("op") == "forward token"]
        self.assertEqual([(e["app"], e["group"], e["client"], e.get("account"), e["outcome"]) for e in entries],
                         [("%s via broker pid %d" % (self.interpreter, self.alice.broker.pid), GROUP, CLIENT, ALICE_HOME_ACCOUNT_ID, "granted")],
                         "Alice's audit log, as root reads it")

    def test_b_alice_silent_call_is_refreshed_by_the_keeper_with_the_rotated_refresh_token(self):
        before = len(grants())
        pid, answer, _ = self.app(self.alice, CLIENT, "silent", username=ALICE["username"])
        self.assertTrue(answer["account_found"], "MSAL Python keeps the account the broker gave it")
        result = answer["result"] or {}
        self.assertEqual(result.get("token_source"), "broker", {k: v for k, v in result.items() if k != "access_token"})
        after = grants()
        self.assertEqual(len(after), before + 1, "one refresh, by the keeper")
        refreshed = after[-1]
        self.assertEqual((refreshed["client_id"], refreshed["redeemed"], refreshed["outcome"], refreshed["sdk"]),
                         (CLIENT, self.first_refresh["issued"], "ok", "-"), "the keeper kept the rotated refresh token")
        self.assertEqual((refreshed["host"], refreshed["path"]), ("login.microsoftonline.com", "/%s/oauth2/v2.0/token" % TENANT))
        self.assertTrue(result.get("access_token") == issued_access_token(refreshed), "the app got the token the provider issued")
        self.assertEqual(len([line for line in self.keeper_lines(self.alice, pid, "forward token") if line.endswith("-> granted")]), 1,
                         read(self.keeper_log))
        accounts = self.app(self.alice, CLIENT, "accounts")[1]["accounts"]
        self.assertEqual([(a["username"], a["home_account_id"], a["account_source"]) for a in accounts],
                         [(ALICE["username"], ALICE_HOME_ACCOUNT_ID, "broker")])

    def test_c_a_client_the_apps_file_does_not_name_gets_no_token(self):
        before = len(grants())
        pid, answer, _ = self.app(self.alice, UNLISTED, "sign_in")
        result = answer["result"]
        self.assertFalse("access_token" in result, "refused")  # (a failure prints no token)
        self.assertEqual(result.get("error"), "broker_error", result)
        self.assertIn("may not use client %s" % UNLISTED, result.get("error_description", ""), result)
        self.assertEqual(len(grants()), before, "nothing is redeemed for a refused client")
        token = self.keeper_lines(self.alice, pid, "forward token")
        self.assertTrue(token and all("client %s" % UNLISTED in line and "-> refused: accessDenied" in line for line in token),
                        "the keeper's log names the refusal:\n" + read(self.keeper_log))
        entries = [e for e in self.audit(self.alice) if e.get("pid") == pid]
        self.assertTrue(entries and all(e["client"] == UNLISTED and e["outcome"].startswith("refused") for e in entries), entries)

    def test_d_bob_through_his_own_broker_gets_nothing_of_alices(self):
        self.assertIn("token keeper", read(self.bob.broker_log))
        before = len(grants())
        pid, answer, printed = self.app(self.bob, CLIENT, "sign_in")
        result = answer["result"]
        self.assertFalse("access_token" in result, "Bob gets no token")
        self.assertEqual(result.get("error"), "broker_error", result)
        self.assertIn("holds no group %s of uid %d" % (GROUP, self.bob.uid), result.get("error_description", ""), result)
        self.assertNotIn(ALICE["username"], printed, "nor Alice's account")
        self.assertEqual(self.app(self.bob, CLIENT, "accounts")[1]["accounts"], [])
        silent = self.app(self.bob, CLIENT, "silent", username=ALICE["username"])[1]
        self.assertEqual((silent["account_found"], silent["result"]), (False, None), silent)
        self.assertEqual(len(grants()), before, "nothing is redeemed for Bob")
        token = self.keeper_lines(self.bob, pid, "forward token")
        self.assertTrue(token and all("-> failed: notFound" in line for line in token), "the keeper's log:\n" + read(self.keeper_log))
        self.assertNotIn(ALICE["username"], read(self.bob.broker_log))
        self.assertEqual([line for line in read(self.keeper_log).splitlines() if "uid %d)" % self.bob.uid in line and "-> granted" in line], [],
                         "nothing is granted to Bob")

    def test_e_no_refresh_token_leaves_the_keeper(self):
        issued = issued_refresh_tokens()
        self.assertGreaterEqual(len(issued), 3, "the sign-in and the keeper's two refreshes issued refresh tokens")
        places = {"Alice's home (every file)": home_text(self.alice.home), "Bob's home": home_text(self.bob.home),
                  "Alice's broker's output": read(self.alice.broker_log), "Bob's broker's output": read(self.bob.broker_log),
                  "MSAL Python's output": "\n".join(self.printed),
                  "Alice's trace log": read(self.alice.trace), "Bob's trace log": read(self.bob.trace)}
        cache = read(os.path.join(self.alice.home, "msal-cache-%s.json" % CLIENT))
        self.assertIn(ALICE_HOME_ACCOUNT_ID, cache, "MSAL Python's cache holds the account (else it proves nothing)")
        places["MSAL Python's cache"] = cache
        self.assertGreater(len(read(self.alice.trace).splitlines()), 10, "Alice's processes logged (else it proves nothing)")
        for place, text in places.items():
            self.assertEqual([token for token in issued if token in text], [], "refresh tokens in " + place)
            self.assertNotRegex(text, r"rt-rotated-\d+", "no refresh token of the provider's form in " + place)


if __name__ == "__main__":
    unittest.main(verbosity=2)
