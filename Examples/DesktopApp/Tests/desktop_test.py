"""The desktop sample under Xvfb, driven as a user would through the accessibility tree (AT-SPI).

Run by test-desktop.sh inside a private D-Bus session on an Xvfb display with a window manager
(metacity, compositing). The real GTK 4 / libadwaita app signs two accounts in at the local
identity provider (fake_idp.py, its Graph stand-in serving one of them a photo) with headless
Chromium as the system browser; the test reads the header bar and the account's rows (name, email,
tenant, the token's expiry and scopes), the avatar's pixels (the photo, else initials), switches
between the accounts, calls Graph, sees an error as a toast and in the log view, signs out from the
CLI (reflected within a second) and from the app, signs in with a device code, and saves a
screenshot of the framed window. Last, in the session's gnome-keyring with no default collection,
it dismisses and then answers the keyring's "Choose password for new keyring" (through
scripts/lib/answer-keyring-prompt.py) and signs in into the new collection.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import pyatspi

CLIENT = "aaaaaaaa-0000-0000-0000-00000000d35c"
TENANT = "11111111-1111-1111-1111-111111111111"
TITLE = "TokenCache Desktop Sample"
ALICE = {"uid": "a11ce000-0000-0000-0000-000000000000", "utid": TENANT, "username": "alice@contoso.com", "name": "Alice Example"}
BOB = {"uid": "b0b00000-0000-0000-0000-000000000000", "utid": TENANT, "username": "bob@contoso.com", "name": "Bob Example"}
PHOTO_RGB = (208, 48, 47)  # the sweater in Alice's photo (Bob has none: his initials show)
PHOTO_PIXELS = 400  # the 96 px round avatar shows about 900 of its pixels; initials, none

checks = []


def check(what, condition, detail=""):
    checks.append((what, bool(condition), detail))
    print(("ok     " if condition else "FAILED ") + what + (f" ({detail})" if detail and not condition else ""), flush=True)
    if not condition:
        raise SystemExit(1)


def wait_for(what, predicate, timeout=60.0, detail=None):
    """Polls the UI (an end-to-end test of another process: nothing to be told by) until predicate() is truthy.
    Generous timeouts: the accessibility tree answers slowly on a machine the rest of CI keeps busy."""
    deadline = time.monotonic() + timeout
    problem = ""
    while True:
        try:
            value = predicate()
        except Exception as error:  # a node the app replaced while it was read (GLib.GError): read again
            value, problem = None, f"; last read failed: {error}"
        if value:
            check(what, True)
            return value
        if time.monotonic() > deadline:
            check(what, False, "not within %.0f s%s%s" % (timeout, problem, "; " + detail() if detail else ""))
        time.sleep(0.1)


class Provider:
    """fake_idp.py on loopback, with its Graph stand-in."""

    def __init__(self, script):
        self.process = subprocess.Popen([sys.executable, script, "--bind", "127.0.0.1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def control(self, command):
        request = urllib.request.Request(self.url + "/control", data=json.dumps(command).encode(), method="POST")
        urllib.request.urlopen(request).read()

    def close(self):
        self.process.stdin.close()
        self.process.kill()
        self.process.wait()


def find_app(name, process, timeout=60.0):
    def lookup():
        if process.poll() is not None:
            probe = subprocess.run(["import", "-window", "root", "png:/dev/null"], capture_output=True, text=True)
            check(f"the app {name} runs", False, f"it exited with {process.returncode}; DISPLAY={os.environ.get('DISPLAY')}; "
                                                 f"import: {probe.returncode} {probe.stderr.strip()}")
        desktop = pyatspi.Registry.getDesktop(0)
        return next((app for app in desktop if app is not None and app.name == name), None)
    return wait_for(f"the app {name} shows on the accessibility bus", lookup, timeout)


def descendants(node, predicate):
    found = []
    pyatspi.findAllDescendants(node, lambda n: n is not None and predicate(n) and found.append(n) and False)
    return found


def tree(node):
    return "; ".join(f"{n.getRoleName()} {n.name!r}" for n in descendants(node, lambda n: True))


def find(node, role, name=None, prefix=None, required=True):
    """The first descendant with this role and name (or name prefix); None, or a failed check, when there is none."""
    match = pyatspi.findDescendant(node, lambda n: n is not None and n.getRoleName() == role
                                   and (name is None or n.name == name) and (prefix is None or n.name.startswith(prefix)))
    if match is None and required:
        check(f"a {role} named {name or prefix!r} exists", False, tree(node))
    return match


def labels(node):
    return [n.name for n in descendants(node, lambda n: n.getRoleName() == "label")]


def label_text(app, prefix):
    return next((text for text in labels(app) if text.startswith(prefix)), None)


def subtitle(app):
    """The header bar's subtitle: the sign-in state ("Signed out", "Signed in as …")."""
    title = find(app, "filler", "AdwWindowTitle", required=False)
    texts = labels(title) if title is not None else []
    return texts[1] if len(texts) > 1 else None


def row_value(app, title):
    """An account row's value: the subtitle label of the list item titled `title`."""
    row = find(app, "list item", title, required=False)
    texts = labels(row) if row is not None else []
    return texts[1] if len(texts) > 1 and texts[0] == title else None


def is_sensitive(node):
    return node.getState().contains(pyatspi.STATE_SENSITIVE)


def click(app, role, name=None, prefix=None):
    node = find(app, role, name, prefix)
    action = node.queryAction()
    names = [action.getName(i) for i in range(action.nActions)]
    if not names:
        check(f"the {role} {name or prefix!r} has an action", False)
    action.doAction(next((i for i, n in enumerate(names) if n in ("click", "press", "activate", "toggle")), 0))
    print("  (clicked", role, repr(name or prefix), "actions", names, ")", flush=True)


def text_of(node):
    text = node.queryText()
    return text.getText(0, text.characterCount)


def log_text(app):
    """The Log page's text view (read through AT-SPI whichever page is shown)."""
    return text_of(find(app, "text", "Log"))


def screenshot(path):
    subprocess.run(["import", "-window", "root", path], check=True)


def window_box(title):
    """The window's X geometry (its frame and shadow, drawn by GTK under a compositing window manager)."""
    out = subprocess.run(["xwininfo", "-name", title], check=True, capture_output=True, text=True).stdout
    value = lambda key: int(re.search(key + r":\s+(-?\d+)", out).group(1))
    return value("Absolute upper-left X"), value("Absolute upper-left Y"), value("Width"), value("Height")


def framed_screenshot(path, title):
    """The framed window as the README shows it: the screen cropped to the window with its shadow."""
    x, y, width, height = window_box(title)
    subprocess.run(["import", "-window", "root", "-crop", f"{width}x{height}+{x}+{y}", "+repage", path], check=True)


def photo_pixels(path):
    """How many pixels of the screen have the photo's colour (the avatar's position needs no window coordinates)."""
    screenshot(path)
    out = subprocess.run(["convert", path, "-alpha", "off", "-fuzz", "3%", "-fill", "white", "+opaque", "rgb(%d,%d,%d)" % PHOTO_RGB,
                          "-fill", "black", "-opaque", "rgb(%d,%d,%d)" % PHOTO_RGB, "-negate", "-format", "%[fx:mean*w*h]", "info:"],
                         check=True, capture_output=True, text=True).stdout
    return int(float(out.strip()))


def shows_account(app, user):
    """The header bar and the rows show `user` and its token."""
    values = {title: row_value(app, title) for title in ("Name", "Email", "Tenant", "Token expires", "Scopes")}
    return (subtitle(app) == "Signed in as " + user["username"] and values["Name"] == user["name"] and values["Email"] == user["username"]
            and values["Tenant"] == TENANT and "min)" in (values["Token expires"] or "") and "User.Read" in (values["Scopes"] or ""))


def main():
    parser = argparse.ArgumentParser()
    for option in ("--app", "--tokencache", "--idp", "--screenshot", "--answer-keyring-prompt"):
        parser.add_argument(option, required=True)
    arguments = parser.parse_args()
    work = tempfile.mkdtemp(prefix="desktop-test-")
    provider = Provider(arguments.idp)
    processes = []
    probe = os.path.join(work, "probe.png")
    try:
        photo = os.path.join(work, "photo.png")
        # A stand-in portrait: head and shoulders on a blue backdrop, the sweater of PHOTO_RGB.
        subprocess.run(["convert", "-size", "192x192", "radial-gradient:#b9cde4-#6f8fb8", "-fill", "rgb(%d,%d,%d)" % PHOTO_RGB,
                        "-draw", "ellipse 96,206 74,62 0,360", "-fill", "#e3b28f", "-draw", "rectangle 84,120 108,150",
                        "-draw", "circle 96,92 96,54", "-fill", "#4a3426", "-draw", "ellipse 96,72 40,24 180,360", photo], check=True)
        provider.control({"sign_in_user": ALICE, "browser_action": "submit"})
        with open(photo, "rb") as file:
            import base64
            provider.control({"graph_photos": {ALICE["uid"]: {"content_type": "image/png", "base64": base64.b64encode(file.read()).decode()}}})
        # The browser: headless Chromium in a process group of its own, so the test can end it and its helpers.
        browser = os.path.join(work, "browser.sh")
        with open(browser, "w") as file:
            file.write(f'#!/bin/sh\necho $$ >> {work}/browser.pids\nexec /usr/bin/setsid /usr/bin/chromium --headless=new --no-sandbox '
                       f'--disable-gpu --no-first-run --password-store=basic --user-data-dir={work}/chromium-$$ "$1"\n')
        os.chmod(browser, 0o755)
        environment = dict(os.environ, XDG_DATA_HOME=os.path.join(work, "data"), XDG_CONFIG_HOME=os.path.join(work, "config"),
                           TOKENCACHE_BACKEND="file", TOKENCACHE_SAMPLE_CLIENT_ID=CLIENT,
                           TOKENCACHE_SAMPLE_AUTHORITY=f"{provider.url}/{TENANT}", TOKENCACHE_GRAPH_ENDPOINT=provider.url,
                           BROWSER=browser + " %s", GTK_A11Y="atspi", NO_COLOR="1")
        app_log = open(os.path.join(work, "app.log"), "w")

        # A setting the app cannot work with: the window still opens, with the problem and what to do.
        app_process = subprocess.Popen([arguments.app], env=dict(environment, TOKENCACHE_BACKEND="keyring"), stdout=app_log, stderr=subprocess.STDOUT)
        processes.append(app_process)
        app = find_app("DesktopApp", app_process)
        wait_for("an invalid TOKENCACHE_BACKEND shows a window with the problem and what to do",
                 lambda: label_text(app, "TOKENCACHE_BACKEND=keyring is not a backend") and label_text(app, "Set it to one of auto, "))
        app_process.kill()
        app_process.wait()
        wait_for("the first window is gone", lambda: not any(a is not None and a.name == "DesktopApp" for a in pyatspi.Registry.getDesktop(0)))

        app_process = subprocess.Popen([arguments.app], env=environment, stdout=app_log, stderr=subprocess.STDOUT)
        processes.append(app_process)
        app = find_app("DesktopApp", app_process)
        check("the window has the app's title", find(app, "frame", TITLE) is not None)
        wait_for("the app starts signed out", lambda: subtitle(app) == "Signed out")
        check("Sign in can be used", is_sensitive(find(app, "push button", "Sign in")))
        check("Call Graph and Sign out cannot, without an account",
              not is_sensitive(find(app, "push button", "Call Graph")) and not is_sensitive(find(app, "push button", "Sign out")))
        check("the rows show no account", row_value(app, "Name") == "–" and row_value(app, "Email") == "–")

        # The Log page's switch turns the library's logging on.
        click(app, "page tab", "Log")
        click(app, "check box", prefix="Library logging")
        wait_for("the library logging switch is on", lambda: find(app, "check box", prefix="Library logging").getState().contains(pyatspi.STATE_CHECKED))
        wait_for("the log view says so", lambda: "Library logging on" in log_text(app))
        click(app, "page tab", "Account")

        click(app, "push button", "Sign in")
        wait_for("Sign in completes in the browser at the identity provider", lambda: subtitle(app) == "Signed in as alice@contoso.com", timeout=120)
        wait_for("the rows show the account's name, email, tenant, token expiry and scopes", lambda: shows_account(app, ALICE),
                 detail=lambda: str(labels(app)))
        wait_for("the avatar shows the account's photo", lambda: photo_pixels(probe) >= PHOTO_PIXELS)
        check("with an account, the button adds another", find(app, "push button", "Add account", required=False) is not None
              and find(app, "push button", "Sign in", required=False) is None, tree(app))

        click(app, "push button", "Call Graph")
        wait_for("Call Graph shows /me", lambda: "alice@contoso.com" in (row_value(app, "Profile (/me)") or ""))
        wait_for("the log view has Graph's answer", lambda: '"userPrincipalName":"alice@contoso.com"' in log_text(app).replace(" ", ""))

        # A second account: Add account signs Bob in (no photo: his initials) and makes him current.
        provider.control({"sign_in_user": BOB})
        click(app, "push button", "Add account")
        wait_for("a second account signs in", lambda: subtitle(app) == "Signed in as bob@contoso.com", timeout=120)
        wait_for("the rows show the second account", lambda: shows_account(app, BOB), detail=lambda: str(labels(app)))
        wait_for("the avatar shows initials, not the first account's photo", lambda: photo_pixels(probe) < 100)
        check("the Graph row no longer shows the first account's profile", row_value(app, "Profile (/me)") == "–")
        wait_for("the switcher lists both accounts", lambda: find(app, "list item", "Alice Example", required=False)
                 and find(app, "list item", "Bob Example", required=False) and find(app, "push button", prefix="Use alice@contoso.com", required=False))

        click(app, "push button", prefix="Use alice@contoso.com")
        wait_for("the switcher makes the first account current again", lambda: shows_account(app, ALICE), detail=lambda: str(labels(app)))
        wait_for("its photo is back", lambda: photo_pixels(probe) >= PHOTO_PIXELS)
        check("the switcher offers the second account", find(app, "push button", prefix="Use bob@contoso.com", required=False) is not None)
        click(app, "push button", "Call Graph")
        wait_for("Call Graph shows the first account's /me", lambda: "alice@contoso.com" in (row_value(app, "Profile (/me)") or ""))
        os.makedirs(os.path.dirname(os.path.abspath(arguments.screenshot)), exist_ok=True)
        framed_screenshot(arguments.screenshot, TITLE)

        # An error: the sign-in is cancelled at the provider; a toast says so, and the log keeps it.
        provider.control({"browser_action": "cancel"})
        click(app, "push button", "Add account")
        error = wait_for("a failed sign-in is logged", lambda: next((line.split("Error: ", 1)[1] for line in log_text(app).splitlines()
                                                                   if "Error: " in line), None), timeout=120)
        wait_for("and shown as a toast", lambda: error in labels(app), detail=lambda: f"{error!r} in {labels(app)}")
        wait_for("the current account stays", lambda: subtitle(app) == "Signed in as alice@contoso.com")
        provider.control({"browser_action": "submit", "sign_in_user": ALICE})

        logout = subprocess.run([arguments.tokencache, "logout", "--backend", "file", "--client", CLIENT, "--account", ALICE["username"]],
                                env=environment, capture_output=True, text=True)
        check("tokencache logout signs the app out of the account", logout.returncode == 0, logout.stderr)
        signed_out = time.monotonic()
        wait_for("the CLI's logout shows in the app: the other account is current", lambda: subtitle(app) == "Signed in as bob@contoso.com"
                 and row_value(app, "Email") == "bob@contoso.com", timeout=10)
        # How fast is a figure, not a pass condition (a loaded CI machine polls AT-SPI slowly).
        print("the CLI's logout showed in the app after %.2f s" % (time.monotonic() - signed_out), flush=True)

        click(app, "push button", "Sign out")
        wait_for("Sign out clears the last account", lambda: subtitle(app) == "Signed out" and row_value(app, "Email") == "–"
                 and row_value(app, "Token expires") == "–")
        wait_for("the photo is cleared", lambda: photo_pixels(probe) < 100)  # the screen is painted after the tree changes
        wait_for("Sign in is offered again", lambda: find(app, "push button", "Sign in", required=False))
        log = log_text(app)
        for line in ("Signed in as alice@contoso.com", "Signed in as bob@contoso.com", "Switched to alice@contoso.com", "Signed out of bob@contoso.com"):
            check(f"the log view has {line!r}", line in log, log[-800:])
        check("the log view has the library's debug lines", "[debug]" in log, log[-800:])
        app_log.flush()
        with open(os.path.join(work, "app.log")) as file:
            output = file.read()
        check("library logging also goes to standard error", "[debug]" in output, output[-500:])
        app_process.kill()
        app_process.wait()

        # No browser (the BROWSER command fails): Sign in falls back to a device code, shown in the window.
        environment["BROWSER"] = "/bin/false"
        app_process = subprocess.Popen([arguments.app], env=environment, stdout=app_log, stderr=subprocess.STDOUT)
        processes.append(app_process)
        app = find_app("DesktopApp", app_process)
        wait_for("the second app starts signed out", lambda: subtitle(app) == "Signed out")
        click(app, "push button", "Sign in")
        code = wait_for("without a browser, the window shows a device code",
                        lambda: next((m.group(0) for text in labels(app) for m in [re.search(r"\bUC\d{4}\b", text)] if m), None))
        check("Sign in cannot be used while a sign-in is under way", not is_sensitive(find(app, "push button", "Sign in")))
        provider.control({"approve_device": code})
        wait_for("the device code sign-in completes", lambda: subtitle(app) == "Signed in as alice@contoso.com", timeout=90)
        wait_for("the device code sign-in shows the account", lambda: row_value(app, "Email") == "alice@contoso.com")
        app_process.kill()
        app_process.wait()

        # The keyring, in a session whose gnome-keyring has no 'default' collection (started by
        # D-Bus activation with no login keyring, as a desktop other than GNOME starts it). Opening
        # the cache, the keyring asks for a new keyring's password (gcr-prompter's "Choose password
        # for new keyring") while the app's window says it is opening the keyring. Dismissed: the
        # window shows the problem and the ways forward. Answered: the app opens signed out, and a
        # sign-in is saved in the new default collection, where the CLI finds it.
        keyring_environment = dict(environment, XDG_DATA_HOME=os.path.join(work, "keyring-data"), BROWSER=browser + " %s")
        del keyring_environment["TOKENCACHE_BACKEND"]  # auto
        keyrings = os.path.join(os.environ["XDG_DATA_HOME"], "keyrings")
        check("the session's keyring has no collection yet", not os.path.isdir(keyrings) or not os.listdir(keyrings),
              str(os.path.isdir(keyrings) and os.listdir(keyrings)))

        def answering_the_keyring_prompt(*answer):
            """The app started while answer-keyring-prompt.py (listening first) answers the keyring's prompt."""
            ready = os.path.join(work, "prompt-ready")
            if os.path.exists(ready):
                os.unlink(ready)
            os.mkfifo(ready)
            answerer = subprocess.Popen(["/usr/bin/python3", arguments.answer_keyring_prompt, "--ready", ready, *answer],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            processes.append(answerer)
            with open(ready) as fifo:  # it listens to AT-SPI events before the prompt can appear
                fifo.read()
            started = subprocess.Popen([arguments.app], env=keyring_environment, stdout=app_log, stderr=subprocess.STDOUT)
            processes.append(started)
            return started, find_app("DesktopApp", started), answerer

        def pressed(output):
            """The buttons answer-keyring-prompt.py says it pressed (a JSON line each)."""
            return [json.loads(line).get("answered") for line in output.splitlines() if line.startswith("{")]

        app_process, app, answerer = answering_the_keyring_prompt("--cancel")
        answered = answerer.communicate(timeout=90)[0]
        print("the prompt's answerer: " + answered.strip(), flush=True)
        check("opening the cache shows the keyring's prompt, dismissed here", pressed(answered) == ["Cancel"], answered)
        wait_for("a dismissed prompt: the window shows the problem and the ways forward",
                 lambda: any("was dismissed or not answered" in text for text in labels(app))
                 and any(text.startswith("Retry and choose a password") and "--backend file" in text for text in labels(app)), detail=lambda: str(labels(app)))
        app_process.kill()
        app_process.wait()
        wait_for("that window is gone", lambda: not any(a is not None and a.name == "DesktopApp" for a in pyatspi.Registry.getDesktop(0)))

        app_process, app, answerer = answering_the_keyring_prompt("desktop-keyring-password")
        answered = answerer.communicate(timeout=90)[0]
        print("the prompt's answerer: " + answered.strip(), flush=True)
        check("the keyring's prompt is shown again and answered with a new password", pressed(answered) == ["Continue"], answered)
        wait_for("the app then opens signed out", lambda: subtitle(app) == "Signed out")
        check("and Sign in can be used", is_sensitive(find(app, "push button", "Sign in")))
        provider.control({"sign_in_user": ALICE, "browser_action": "submit"})
        click(app, "push button", "Sign in")
        wait_for("the sign-in is saved in the keyring", lambda: subtitle(app) == "Signed in as alice@contoso.com", timeout=120,
                 detail=lambda: str(labels(app)))
        check("the new keyring is on disk", os.path.isdir(keyrings) and any(name.endswith(".keyring") for name in os.listdir(keyrings)),
              str(os.path.isdir(keyrings) and os.listdir(keyrings)))
        listed = subprocess.run([arguments.tokencache, "list", "--backend", "secret-service", "--client", CLIENT, "--json"],
                                env=keyring_environment, capture_output=True, text=True)
        check("the CLI finds the account in the keyring's default collection",
              listed.returncode == 0 and ALICE["username"] in listed.stdout, listed.stdout + listed.stderr)
        print(f"desktop: {len(checks)} passed, 0 failed", flush=True)
    except SystemExit:
        with open(os.path.join(work, "app.log")) as file:
            print("--- the app's output (last lines) ---\n" + file.read()[-3000:], file=sys.stderr)
        # Last, where a CI log cut short still shows it: which check failed.
        print("desktop: FAILED " + next((f"{what} ({detail})"[:1500] for what, passed, detail in checks if not passed), "?"), file=sys.stderr, flush=True)
        raise
    finally:
        for process in processes:
            process.kill()
            process.wait()
        if os.path.exists(os.path.join(work, "browser.pids")):
            for pid in open(os.path.join(work, "browser.pids")).read().split():
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        provider.close()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
