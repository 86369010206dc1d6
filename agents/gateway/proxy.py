"""The gateway's door inside a container that has no network: a TCP listener on the container's
own loopback, each connection passed byte for byte to the gateway's unix socket, which the sweep
mounts into the container. An installed agent's SDK points at http://127.0.0.1:PORT.

    python3 proxy.py SOCKET       # prints the port once it listens, then serves in the background

Standard library only: it runs on the driver's runtime (images/runtime) in any image. It is a file
of its own, copied beside the socket, never imported by the sweep.
"""

import os
import socket
import sys
import threading


def pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            upstream.close()
            continue
        for source, target in ((client, upstream), (upstream, client)):
            threading.Thread(target=pipe, args=(source, target), daemon=True).start()


def main(argv: list[str]) -> None:
    path = argv[1]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    if os.fork():  # the parent says where, once it listens, and returns: the child serves
        print(listener.getsockname()[1], flush=True)
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    serve(listener, path)


if __name__ == "__main__":
    main(sys.argv)
