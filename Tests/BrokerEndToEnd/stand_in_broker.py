"""A minimal stand-in for com.microsoft.identity.broker1 on the session bus, to learn the wire format.

Serves the broker's interface (each method `(s protocolVersion, s correlationId, s requestJson) -> s`)
on the bus of DBUS_SESSION_BUS_ADDRESS, appends every call as one JSON line to LOG, and answers from
REPLIES (a JSON file read on every call, so a test can change the answers while it runs):
  {"<method>": <reply JSON object, sent as a string> | [reply, reply, ...] (one per call, the last
   repeated) | {"dbus_error": "<name>", "message": "..."} (a D-Bus error instead of a reply)}
A method REPLIES does not name answers with {} (as sso-mib's mock broker).
  python3 stand_in_broker.py LOG REPLIES
Prints "ready" once it owns the name; serves until stdin closes.
"""
import json
import sys
import threading

from gi.repository import Gio, GLib

NAME = "com.microsoft.identity.broker1"
PATH = "/com/microsoft/identity/broker1"
METHODS = ("acquireTokenInteractively", "acquireTokenSilently", "getAccounts", "removeAccount",
           "acquirePrtSsoCookie", "generateSignedHttpRequest", "cancelInteractiveFlow", "getLinuxBrokerVersion")
XML = "<node><interface name='com.microsoft.identity.Broker1'>%s</interface></node>" % "".join(
    "<method name='%s'><arg type='s' name='protocolVersion' direction='in'/><arg type='s' name='correlationId' direction='in'/>"
    "<arg type='s' name='requestJson' direction='in'/><arg type='s' name='response' direction='out'/></method>" % m for m in METHODS)

log_path, replies_path = sys.argv[1], sys.argv[2]
calls = {}


def reply_for(method):
    try:
        with open(replies_path) as file:
            replies = json.load(file)
    except FileNotFoundError:
        replies = {}
    reply = replies.get(method, {})
    if isinstance(reply, list):
        reply = reply[min(calls.get(method, 0), len(reply) - 1)]
    calls[method] = calls.get(method, 0) + 1
    return reply


def on_call(connection, sender, path, interface, method, parameters, invocation):
    protocol, correlation, request = parameters.unpack()
    try:
        parsed = json.loads(request)
    except ValueError:
        parsed = request
    reply = reply_for(method)
    with open(log_path, "a") as log:
        log.write(json.dumps({"method": method, "sender": sender, "protocol": protocol, "correlation": correlation,
                              "request": parsed, "reply": reply}) + "\n")
    if isinstance(reply, dict) and "dbus_error" in reply:
        invocation.return_dbus_error(reply["dbus_error"], reply.get("message", ""))
    else:
        invocation.return_value(GLib.Variant("(s)", (reply if isinstance(reply, str) else json.dumps(reply),)))


loop = GLib.MainLoop()
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
bus.register_object(PATH, Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0], on_call, None, None)


def acquired(*_):
    print("ready", flush=True)


Gio.bus_own_name_on_connection(bus, NAME, Gio.BusNameOwnerFlags.DO_NOT_QUEUE, acquired, lambda *_: loop.quit())
threading.Thread(target=lambda: (sys.stdin.read(), GLib.idle_add(loop.quit)), daemon=True).start()
loop.run()
