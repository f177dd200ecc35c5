"""The download server of the throughput benches: GET /big?n=N answers N bytes
(Content-Length) from a 1 MiB block, one thread per connection. The same program runs in a box
and on the host, so each path serves alike.

    python3 serve_bytes.py PORT
"""
import socket
import sys
import threading

BLOCK = memoryview(b"x" * (1 << 20))


def serve(c):
    with c:
        head = b""
        while b"\r\n\r\n" not in head:
            piece = c.recv(65536)
            if not piece:
                return
            head += piece
        n = int(head.split(b" ", 2)[1].split(b"n=")[1])
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" % n)
        while n:
            k = min(n, len(BLOCK))
            c.sendall(BLOCK[:k])
            n -= k


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
