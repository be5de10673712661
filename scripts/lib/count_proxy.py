#!/usr/bin/env python3
"""A TCP relay on 127.0.0.1 that counts the bytes it forwards.

    count_proxy.py LISTEN_PORT TARGET_PORT OUT.json

Every connection to LISTEN_PORT is forwarded to 127.0.0.1:TARGET_PORT, both
sockets with TCP_NODELAY (so small messages are not held back); the bytes
each way (WebSocket frames and handshake: what a socket sends and receives)
are summed over connections. On SIGTERM or SIGINT it writes
{"to_target": N, "from_target": M, "connections": K} to OUT.json and exits.
Whatever syncs through it, nostrwire or strfry, is measured the same way.
"""

import json
import signal
import socket
import sys
import threading

lock = threading.Lock()
totals = {"to_target": 0, "from_target": 0, "connections": 0}


def pump(src, dst, key):
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
            with lock:
                totals[key] += len(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client, target_port):
    upstream = socket.create_connection(("127.0.0.1", target_port))
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with lock:
        totals["connections"] += 1
    back = threading.Thread(target=pump, args=(upstream, client, "from_target"), daemon=True)
    back.start()
    pump(client, upstream, "to_target")
    back.join()
    client.close()
    upstream.close()


def main():
    listen_port, target_port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def finish(*_):
        with lock:
            with open(out, "w") as f:
                json.dump(totals, f)
        sys.exit(0)

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(16)
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, target_port), daemon=True).start()


if __name__ == "__main__":
    main()
