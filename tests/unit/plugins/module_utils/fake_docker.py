"""A one-shot Docker daemon on a unix socket: answers one request with a canned HTTP response."""
import socket
import threading


def serve_once(path, answer):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def handle():
        conn, dummy = server.accept()
        conn.recv(4096)
        conn.sendall(answer)
        conn.close()
        server.close()
    threading.Thread(target=handle, daemon=True).start()
