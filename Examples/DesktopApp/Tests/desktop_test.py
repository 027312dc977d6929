"""The desktop sample under Xvfb, driven as a user would through the accessibility tree (AT-SPI).

Run by test-desktop.sh inside a private D-Bus session on an Xvfb display. The real GTK 4 app signs
in at the local identity provider (fake_idp.py, its Graph stand-in serving a photo) with headless
Chromium as the system browser; the test reads the labels and the photo's pixels, calls Graph,
signs out from the CLI (reflected within a second) and from the app, and saves a screenshot.
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
ALICE = {"uid": "a11ce000-0000-0000-0000-000000000000", "utid": TENANT, "username": "alice@contoso.com", "name": "Alice Example"}
PHOTO_RGB = (208, 48, 47)  # the photo is a square of this colour

checks = []


def check(what, condition, detail=""):
    checks.append((what, bool(condition)))
    print(("ok     " if condition else "FAILED ") + what + (f" ({detail})" if detail and not condition else ""), flush=True)
    if not condition:
        raise SystemExit(1)


def wait_for(what, predicate, timeout=30.0):
    """Polls the UI (an end-to-end test of another process: nothing to be told by) until predicate() is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            check(what, True)
            return value
        if time.monotonic() > deadline:
            check(what, False, "not within %.0f s" % timeout)
        time.sleep(0.05)


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


def find_app(name, process, timeout=30.0):
    def lookup():
        if process.poll() is not None:
            probe = subprocess.run(["import", "-window", "root", "png:/dev/null"], capture_output=True, text=True)
            check(f"the app {name} runs", False, f"it exited with {process.returncode}; DISPLAY={os.environ.get('DISPLAY')}; "
                                                 f"import: {probe.returncode} {probe.stderr.strip()}")
        desktop = pyatspi.Registry.getDesktop(0)
        return next((app for app in desktop if app is not None and app.name == name), None)
    return wait_for(f"the app {name} shows on the accessibility bus", lookup, timeout)


def find(node, role, name=None, prefix=None):
    """The first descendant with this role and name (or name prefix)."""
    matches = pyatspi.findDescendant(node, lambda n: n is not None and n.getRoleName() == role
                                     and (name is None or n.name == name) and (prefix is None or n.name.startswith(prefix)))
    if matches is None:
        tree = []
        pyatspi.findAllDescendants(node, lambda n: n is not None and tree.append(f"{n.getRoleName()} {n.name!r}") and False)
        check(f"a {role} named {name or prefix!r} exists", False, "; ".join(tree))
    return matches


def labels(app):
    found = []
    pyatspi.findAllDescendants(app, lambda n: n is not None and n.getRoleName() == "label" and found.append(n) and False)
    return [n.name for n in found]


def label_text(app, prefix):
    return next((text for text in labels(app) if text.startswith(prefix)), None)


def click(app, role, name):
    node = find(app, role, name)
    action = node.queryAction()
    names = [action.getName(i) for i in range(action.nActions)]
    if not names:
        check(f"the {role} {name!r} has an action", False)
    action.doAction(next((i for i, n in enumerate(names) if n in ("click", "press", "activate", "toggle")), 0))
    print("  (clicked", role, repr(name), "actions", names, ")", flush=True)


def text_of(node):
    text = node.queryText()
    return text.getText(0, text.characterCount)


def screenshot(path, crop=None):
    """The screen (`crop`: only this component's box, as the README shows the window)."""
    box = [] if crop is None else ["-crop", "%dx%d+%d+%d" % (crop.width, crop.height, crop.x, crop.y), "+repage"]
    subprocess.run(["import", "-window", "root"] + box + [path], check=True)


def pixel(path, x, y):
    out = subprocess.run(["convert", path, "-crop", f"1x1+{x}+{y}", "-depth", "8", "txt:-"], check=True, capture_output=True, text=True).stdout
    values = out.splitlines()[-1].split("(")[1].split(")")[0].split(",")
    return tuple(int(float(v)) for v in values[:3])


def photo_shown(app, path):
    """Whether the image widget shows the photo: its centre, on screen, has the photo's colour."""
    image = find(app, "image", "Account photo")
    # Window coordinates are the screen's: Xvfb runs no window manager, so the window is at 0,0.
    box = image.queryComponent().getExtents(pyatspi.WINDOW_COORDS)
    if box.width <= 0 or box.height <= 0:
        return False
    screenshot(path)
    colour = pixel(path, box.x + box.width // 2, box.y + box.height // 2)
    return all(abs(a - b) <= 8 for a, b in zip(colour, PHOTO_RGB))


def main():
    parser = argparse.ArgumentParser()
    for option in ("--app", "--tokencache", "--idp", "--screenshot"):
        parser.add_argument(option, required=True)
    arguments = parser.parse_args()
    work = tempfile.mkdtemp(prefix="desktop-test-")
    provider = Provider(arguments.idp)
    processes = []
    try:
        photo = os.path.join(work, "photo.png")
        subprocess.run(["convert", "-size", "96x96", "xc:rgb(%d,%d,%d)" % PHOTO_RGB, photo], check=True)
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
        app_process = subprocess.Popen([arguments.app], env=environment, stdout=app_log, stderr=subprocess.STDOUT)
        processes.append(app_process)
        app = find_app("DesktopApp", app_process)
        wait_for("the app starts signed out", lambda: label_text(app, "Signed out"))

        click(app, "push button", "Logging")
        wait_for("the logging toggle is on", lambda: find(app, "push button", "Logging").getState().contains(pyatspi.STATE_PRESSED)
                 or find(app, "push button", "Logging").getState().contains(pyatspi.STATE_CHECKED), timeout=5)

        click(app, "push button", "Sign in")
        wait_for("Sign in completes in the browser at the identity provider", lambda: label_text(app, "Signed in"), timeout=90)
        check("the name label shows the account's name", label_text(app, "Name:") == "Name: Alice Example", str(labels(app)))
        check("the email label shows the account's email", label_text(app, "Email:") == "Email: alice@contoso.com", str(labels(app)))
        wait_for("the image shows the account's photo", lambda: photo_shown(app, os.path.join(work, "probe.png")), timeout=30)

        click(app, "push button", "Call Graph")
        result = find(app, "label", "Graph result")
        wait_for("Call Graph shows /me", lambda: '"userPrincipalName":"alice@contoso.com"' in text_of(result).replace(" ", ""))
        os.makedirs(os.path.dirname(os.path.abspath(arguments.screenshot)), exist_ok=True)
        screenshot(arguments.screenshot, crop=find(app, "frame", "TokenCache Desktop Sample").queryComponent().getExtents(pyatspi.WINDOW_COORDS))

        logout = subprocess.run([arguments.tokencache, "logout", "--backend", "file", "--client", CLIENT, "--account", ALICE["username"]],
                                env=environment, capture_output=True, text=True)
        check("tokencache logout signs the app out", logout.returncode == 0, logout.stderr)
        signed_out = time.monotonic()
        wait_for("the CLI's logout shows in the app", lambda: label_text(app, "Signed out") and label_text(app, "Name:") == "Name: –", timeout=5)
        elapsed = time.monotonic() - signed_out
        check("the CLI's logout shows within a second", elapsed <= 1.0, "%.2f s" % elapsed)

        click(app, "push button", "Sign in")
        wait_for("a second sign-in completes", lambda: label_text(app, "Signed in"), timeout=90)
        click(app, "push button", "Sign out")
        wait_for("Sign out clears the account", lambda: label_text(app, "Signed out") and label_text(app, "Email:") == "Email: –")
        check("the photo is cleared", not photo_shown(app, os.path.join(work, "probe.png")))
        app_log.flush()
        with open(os.path.join(work, "app.log")) as file:
            log = file.read()
        check("the logging toggle made the library log", "[debug]" in log, log[-500:])
        app_process.kill()
        app_process.wait()

        # No browser (the BROWSER command fails): Sign in falls back to a device code, shown in the window.
        environment["BROWSER"] = "/bin/false"
        app_process = subprocess.Popen([arguments.app], env=environment, stdout=app_log, stderr=subprocess.STDOUT)
        processes.append(app_process)
        app = find_app("DesktopApp", app_process)
        wait_for("the second app starts signed out", lambda: label_text(app, "Signed out"))
        click(app, "push button", "Sign in")
        code = wait_for("without a browser, the window shows a device code",
                        lambda: next((m.group(0) for text in labels(app) for m in [re.search(r"\bUC\d{4}\b", text)] if m), None))
        provider.control({"approve_device": code})
        wait_for("the device code sign-in completes", lambda: label_text(app, "Signed in"), timeout=60)
        check("the device code sign-in shows the account", label_text(app, "Email:") == "Email: alice@contoso.com", str(labels(app)))
        print(f"desktop: {len(checks)} passed, 0 failed", flush=True)
    except SystemExit:
        with open(os.path.join(work, "app.log")) as file:
            print("--- the app's output (last lines) ---\n" + file.read()[-3000:], file=sys.stderr)
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
