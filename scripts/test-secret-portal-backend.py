#!/usr/bin/python3
"""A Secret portal backend (org.freedesktop.impl.portal.Secret) for tests, behind the real
xdg-desktop-portal. It answers RetrieveSecret the way a backend with a dialog does when the
user dismisses it (response 1), or fails (response 2), or writes a secret of the wrong size
(response 0), per the documented backend protocol. gnome-keyring, the backend of the other
tests, never prompts and so never answers 1.

usage: test-secret-portal-backend.py BUS_NAME ANSWER LOG
ANSWER: cancel (1), fail (2), error (a D-Bus error, which the portal turns into 2) or short
(0, after writing 10 bytes). Each call's app ID is appended to LOG, so tests know it was asked.
"""
import os
import sys

from gi.repository import Gio, GLib

NAME, ANSWER, LOG = sys.argv[1:4]
INTROSPECTION = """
<node>
  <interface name="org.freedesktop.impl.portal.Secret">
    <method name="RetrieveSecret">
      <arg type="o" name="handle" direction="in"/>
      <arg type="s" name="app_id" direction="in"/>
      <arg type="h" name="fd" direction="in"/>
      <arg type="a{sv}" name="options" direction="in"/>
      <arg type="u" name="response" direction="out"/>
      <arg type="a{sv}" name="results" direction="out"/>
    </method>
    <property name="version" type="u" access="read"/>
  </interface>
</node>"""


def call(connection, sender, path, interface, method, parameters, invocation):
    handle, app_id, index, _ = parameters.unpack()
    with open(LOG, "a") as log:
        log.write(f"RetrieveSecret app_id={app_id!r}\n")
    fd = invocation.get_message().get_unix_fd_list().get(index)
    try:
        if ANSWER == "short":
            os.write(fd, b"0123456789")
    finally:
        os.close(fd)  # the caller's read ends here: no secret follows
    if ANSWER == "error":
        invocation.return_dbus_error("org.freedesktop.DBus.Error.Failed", "test backend: no secret for this app")
        return
    response = {"cancel": 1, "fail": 2, "short": 0}[ANSWER]
    invocation.return_value(GLib.Variant("(ua{sv})", (response, {})))


def get_property(connection, sender, path, interface, name):
    return GLib.Variant("u", 1)


def bus_acquired(connection, name):  # the object exists before the name is owned
    info = Gio.DBusNodeInfo.new_for_xml(INTROSPECTION).interfaces[0]
    connection.register_object("/org/freedesktop/portal/desktop", info, call, get_property, None)


loop = GLib.MainLoop()
Gio.bus_own_name(Gio.BusType.SESSION, NAME, Gio.BusNameOwnerFlags.NONE, bus_acquired, None, lambda *_: loop.quit())
loop.run()
