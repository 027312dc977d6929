#!/usr/bin/python3
"""A stand-in for Microsoft's identity broker on a private session bus, for the broker client's
tests: it owns com.microsoft.identity.broker1, answers each method with the reply a scenario file
names (the shapes MSALRuntime 0.20.7 accepts and sso-mib's mock broker replays; docs/BROKER.md),
and appends every request it gets to a log, one JSON line each: {"method", "protocol",
"correlation_id", "request", "reply"}.

    stand_in_broker.py SCENARIO.json REQUESTS.jsonl

SCENARIO maps a method name to the reply (a JSON value, sent as its text). A method it does not
name answers "{}". The file is read again for every call, so a test may change the replies while
it runs (the broker end-to-end tests' wire-format case, Tests/BrokerEndToEnd, does). Prints "ready" on stdout once it owns the name. Needs python3-gi (Debian's:
run with /usr/bin/python3).
"""
import json
import sys

from gi.repository import Gio, GLib

NAME = "com.microsoft.identity.broker1"
PATH = "/com/microsoft/identity/broker1"
METHODS = ["acquireTokenInteractively", "acquireTokenSilently", "getAccounts", "removeAccount",
           "acquirePrtSsoCookie", "generateSignedHttpRequest", "cancelInteractiveFlow", "getLinuxBrokerVersion"]
XML = "<node><interface name='com.microsoft.identity.Broker1'>" + "".join(
    f"<method name='{m}'><arg type='s' direction='in'/><arg type='s' direction='in'/>"
    f"<arg type='s' direction='in'/><arg type='s' direction='out'/></method>" for m in METHODS) + "</interface></node>"


def main():
    scenario_path, log_path = sys.argv[1], sys.argv[2]
    loop = GLib.MainLoop()

    def on_call(connection, sender, path, interface, method, parameters, invocation):
        protocol, correlation, request = parameters.unpack()
        with open(scenario_path) as f:
            reply = json.load(f).get(method, {})
        with open(log_path, "a") as log:
            log.write(json.dumps({"method": method, "protocol": protocol, "correlation_id": correlation,
                                  "request": json.loads(request), "reply": reply}) + "\n")
        invocation.return_value(GLib.Variant("(s)", (json.dumps(reply),)))

    def on_bus(connection, name):
        node = Gio.DBusNodeInfo.new_for_xml(XML)
        connection.register_object(PATH, node.interfaces[0], on_call, None, None)

    def on_name(connection, name):
        print("ready", flush=True)

    def on_lost(connection, name):
        print("name lost", file=sys.stderr, flush=True)
        loop.quit()

    Gio.bus_own_name(Gio.BusType.SESSION, NAME, Gio.BusNameOwnerFlags.DO_NOT_QUEUE, on_bus, on_name, on_lost)
    loop.run()
    sys.exit(1)


if __name__ == "__main__":
    main()
