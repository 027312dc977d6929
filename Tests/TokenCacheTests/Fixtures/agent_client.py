"""A second, independent client of the token agent's protocol (docs/AGENT.md), for the tests.

  agent_client.py raw SOCKET REQUEST_JSON        one request; writes every byte the agent sent
  agent_client.py load SOCKET REQUEST_JSON COUNT COUNT requests, one connection each; prints
                                                 {"errors": [...], "tokens": [...]} (no token on error)
  agent_client.py abort SOCKET                   connections that die mid-request, in several ways
"""
import json
import socket
import struct
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s


def frame(message):
    body = json.dumps(message).encode()
    return struct.pack(">I", len(body)) + body


def exchange(path, message):
    s = connect(path)
    s.sendall(frame(message))
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data


def decode(data):
    length = struct.unpack(">I", data[:4])[0]
    return json.loads(data[4:4 + length])


mode, path = sys.argv[1], sys.argv[2]
if mode == "raw":
    sys.stdout.buffer.write(exchange(path, json.loads(sys.argv[3])))
elif mode == "load":
    message, count = json.loads(sys.argv[3]), int(sys.argv[4])
    errors, tokens = [], set()
    for _ in range(count):
        try:
            answer = decode(exchange(path, message))
        except Exception as error:  # a refused connection, a short answer
            errors.append(type(error).__name__)
            continue
        if answer.get("ok"):
            tokens.add(answer["token"]["access_token"])
        else:
            errors.append(answer["error"]["code"])
    print(json.dumps({"errors": errors, "tokens": sorted(tokens)}))
elif mode == "abort":
    request = frame({"version": 1, "op": "list"})
    # Half a length; a length and half a body; a length past the bound; a request never read.
    for prefix in (request[:2], request[:9], struct.pack(">I", 1 << 30) + b"{", request):
        s = connect(path)
        s.sendall(prefix)
        s.close()
    print("done")
