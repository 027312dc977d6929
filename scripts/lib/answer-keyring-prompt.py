#!/usr/bin/python3
# Answers gnome-keyring's "Choose password for new keyring" prompt (gcr-prompter, a GTK window)
# through AT-SPI, as a user would: types PASSWORD into both fields and presses Continue, or with
# --cancel presses Cancel. Run with Debian's python3 (pyatspi) inside the test's session bus, on
# the display gcr-prompter opens on. Driven by AT-SPI events, no polling: writes "ready" to
# READY (a FIFO the caller reads) once it listens, so the caller starts the prompt after that;
# prints a JSON line {"answered": "<button>", "staleWindows": N} and exits. Only a window that
# appeared after it started is answered: the prompter may still hold the last prompt's dialog
# (closed, not yet gone from the accessibility tree), and pressing a button there answers nothing;
# and only one on screen (a closed dialog still in the tree is hidden or defunct).
#   answer-keyring-prompt.py --ready READY [--cancel] [PASSWORD]
import json
import sys
import time

import pyatspi

arguments = sys.argv[1:]
ready = None
if "--ready" in arguments:
    at = arguments.index("--ready")
    ready = arguments[at + 1]
    del arguments[at:at + 2]
cancel = "--cancel" in arguments
arguments = [a for a in arguments if a != "--cancel"]
password = arguments[0] if arguments else "new-keyring-password"


def descendants(node, role):
    """The nodes of `role` under node. The prompt's tree is still being built while its events
    arrive: a child may be None or gone mid-walk (pyatspi's findAllDescendants then raises), so
    such a child is skipped and the next event looks again."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        try:
            if current.getRoleName() == role:
                found.append(current)
            children = [current.getChildAtIndex(i) for i in range(current.childCount)]
        except Exception:  # gone meanwhile
            continue
        stack.extend(child for child in children if child is not None)
    return found


answered = False
stale = []  # the prompter's windows when this started: an earlier prompt's


def windows(app, attempts=1):
    """The top-level windows of app, those gone meanwhile left out. A walk that fails midway (a
    window going as it is read) is tried again, 50 ms apart, up to `attempts` times, then gives none."""
    for attempt in range(attempts):
        try:
            return [child for child in (app.getChildAtIndex(i) for i in range(app.childCount)) if child is not None]
        except Exception:  # the app or a window went meanwhile
            if attempt + 1 < attempts:
                time.sleep(0.05)  # the tree settles; nothing to be told by
    return []


def showing(window):
    """Whether window is on screen: a closed prompt's dialog can linger in the tree a while, hidden
    or defunct, and a button pressed there answers nothing."""
    try:
        states = window.getState()
        return states.contains(pyatspi.STATE_SHOWING) and not states.contains(pyatspi.STATE_DEFUNCT)
    except Exception:  # gone meanwhile
        return False


def answer(app):
    """Fills the new prompt of app (gcr-prompter) and presses its button once; False while it is not all there."""
    global answered
    if answered:
        return True
    wanted = "Cancel" if cancel else "Continue"
    for window in windows(app):
        if any(window == old for old in stale) or not showing(window):
            continue
        buttons = {b.name: b for b in descendants(window, "push button")}
        fields = descendants(window, "password text")
        if wanted not in buttons or (not cancel and len(fields) < 2):
            continue
        if not cancel:
            for field in fields:
                field.queryEditableText().setTextContents(password)
        buttons[wanted].queryAction().doAction(0)
        answered = True
        print(json.dumps({"answered": wanted, "staleWindows": len(stale)}), flush=True)
        return True
    return False


def prompter():
    desktop = pyatspi.Registry.getDesktop(0)
    for index in range(desktop.childCount):
        app = desktop.getChildAtIndex(index)
        if app is not None and app.name == "gcr-prompter":
            return app
    return None


def on_event(event):
    try:
        app = event.source.getApplication() if event.source is not None else None
    except Exception:  # a window gone meanwhile
        return
    try:
        done = app is not None and app.name == "gcr-prompter" and answer(app)
    except Exception:  # a widget gone while it was filled: the next event tries again
        return
    if done:
        pyatspi.Registry.stop()


# The prompt's window and its widgets announce themselves (created, shown, focused); each event
# is a chance to find it complete.
events = ["window:create", "window:activate", "object:state-changed:showing", "object:state-changed:focused"]
pyatspi.Registry.registerEventListener(on_event, *events)
# The windows there now are an earlier prompt's: noted before "ready", after which the caller
# starts the prompt this one answers (noted after, its window could be taken for a stale one).
already = prompter()
stale = windows(already, attempts=20) if already is not None else []
if ready is not None:
    with open(ready, "w") as fifo:
        fifo.write("ready\n")
if already is None or not answer(already):
    pyatspi.Registry.start()
