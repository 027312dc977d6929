"""Small Secret Service admin steps for the benchmark's throw-away gnome-keyring (never a real one).

    keyring_admin.py make-default LABEL PASSWORD
        Finds the collection labelled LABEL, makes it the `default` alias and gives it PASSWORD,
        which makes gnome-keyring rewrite it once in its encrypted format (a seeded keyring file is
        textual, i.e. unencrypted), and unlocks it. Uses gnome-keyring's ChangeWithMasterPassword
        and UnlockWithMasterPassword, which need no prompt.
    keyring_admin.py count
        Prints the number of items per collection.
    keyring_admin.py getsecrets GROUP
        The floor for reading a group: one SearchItems and ONE GetSecrets for all its items, on a
        plain session (no encryption work on either side), timed to the reply's arrival (the reply
        is not unpacked); prints JSON.
"""
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

BUS = "org.freedesktop.secrets"
PATH = "/org/freedesktop/secrets"
SERVICE = "org.freedesktop.Secret.Service"


def call(bus, path, interface, method, args, reply):
    return bus.call_sync(BUS, path, interface, method, args, GLib.VariantType(reply), Gio.DBusCallFlags.NONE, 600_000, None).unpack()


def prop(bus, path, interface, name):
    return call(bus, path, "org.freedesktop.DBus.Properties", "Get", GLib.Variant("(ss)", (interface, name)), "(v)")[0]


def collections(bus):
    return {path: prop(bus, path, "org.freedesktop.Secret.Collection", "Label")
            for path in prop(bus, PATH, SERVICE, "Collections")}


def getsecrets(bus, group):
    import json
    import time
    _, session = call(bus, PATH, SERVICE, "OpenSession", GLib.Variant("(sv)", ("plain", GLib.Variant("s", ""))), "(vo)")
    start = time.perf_counter()
    unlocked, _ = call(bus, PATH, SERVICE, "SearchItems", GLib.Variant("(a{ss})", ({"group": group},)), "(aoao)")
    searched = time.perf_counter()
    # The reply is counted, not unpacked: PyGObject turns every byte of an `ay` into a Python int,
    # which took 2 ms per item (25 s at 10,005 items, six times gnome-keyring's own time).
    reply = bus.call_sync(BUS, PATH, SERVICE, "GetSecrets", GLib.Variant("(aoo)", (unlocked, session)),
                          GLib.VariantType("(a{o(oayays)})"), Gio.DBusCallFlags.NONE, 600_000, None)
    done = time.perf_counter()
    secrets = reply.get_child_value(0).n_children()
    call(bus, session, "org.freedesktop.Secret.Session", "Close", None, "()")
    print(json.dumps({"items": len(unlocked), "secrets": secrets, "search_ms": (searched - start) * 1e3,
                      "getsecrets_ms": (done - searched) * 1e3}))


def main():
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    if sys.argv[1] == "getsecrets":
        getsecrets(bus, sys.argv[2])
        return
    if sys.argv[1] == "count":
        for path, label in collections(bus).items():
            items = prop(bus, path, "org.freedesktop.Secret.Collection", "Items")
            print("%s\t%s\t%d" % (path, label, len(items)))
        return
    label, password = sys.argv[2], sys.argv[3]
    matches = [path for path, name in collections(bus).items() if name == label]
    if len(matches) != 1:
        sys.exit("no single collection labelled %r: %r" % (label, collections(bus)))
    collection = matches[0]
    _, session = call(bus, PATH, SERVICE, "OpenSession", GLib.Variant("(sv)", ("plain", GLib.Variant("s", ""))), "(vo)")
    original = (session, b"", b"", "text/plain")
    master = (session, b"", password.encode(), "text/plain")
    call(bus, PATH, "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface", "ChangeWithMasterPassword",
         GLib.Variant("(o(oayays)(oayays))", (collection, original, master)), "()")
    # A password change leaves the collection locked; unlock it as a login would.
    call(bus, PATH, "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface", "UnlockWithMasterPassword",
         GLib.Variant("(o(oayays))", (collection, master)), "()")
    call(bus, PATH, SERVICE, "SetAlias", GLib.Variant("(so)", ("default", collection)), "()")
    call(bus, session, "org.freedesktop.Secret.Session", "Close", None, "()")
    print(collection)


if __name__ == "__main__":
    main()
