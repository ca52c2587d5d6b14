"""A fault-injecting HTTP proxy on loopback, for tests: it stands between cua
and a real server (the built-in env server, a real vLLM) and, per request,
forwards it, answers an error itself, drops the connection, or hangs.

A policy maps each request to one of:
  "pass"          forward, relay the answer
  ("status", N)   answer HTTP N without forwarding (("status", N, body) to choose the body)
  "drop_before"   close the connection without forwarding (the server never sees it)
  "drop_after"    forward, then close without answering (the server acted; the client cannot know)
  "hang"          forward, then hold the connection for `hang_s` before closing it
"""

import http.client
import json
import random
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class FaultProxy:
    def __init__(self, target: str, policy, hang_s: float = 10.0):
        self.target = urlsplit(target)
        self.policy = policy
        self.hang_s = hang_s
        self.faults = Counter()  # kind -> how many were injected
        self.requests = Counter()  # path -> how many arrived
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def _count(self, counter: Counter, key) -> None:
        with self._lock:
            counter[key] += 1

    def _forward(self, method: str, path: str, headers, body: bytes):
        conn = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=600)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheader("Content-Type", "application/octet-stream"), r.read()
        finally:
            conn.close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def _serve(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                proxy._count(proxy.requests, self.path)
                decision = proxy.policy(method, self.path, body)
                if decision != "pass":
                    proxy._count(proxy.faults, decision if isinstance(decision, str) else f"http_{decision[1]}")
                if isinstance(decision, tuple):
                    text = decision[2] if len(decision) > 2 else "injected fault"
                    return self._answer(decision[1], "application/json", json.dumps({"error": text}).encode())
                if decision == "drop_before":
                    self.close_connection = True
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                status, ctype, data = proxy._forward(method, self.path, headers, body)
                if decision == "drop_after":
                    self.close_connection = True
                    return
                if decision == "hang":
                    proxy._stopping.wait(proxy.hang_s)
                    self.close_connection = True
                    return
                self._answer(status, ctype, data)

            def _answer(self, status, ctype, data):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def chaos(seed: int, p500: float = 0.10, pdrop: float = 0.05, phang: float = 0.02):
    """A random policy: HTTP 500s, dropped connections (half before, half after
    forwarding) and hangs, at the given rates."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def policy(method, path, body):
        with lock:
            roll = rng.random()
            before = rng.random() < 0.5
        if roll < p500:
            return ("status", 500)
        if roll < p500 + pdrop:
            return "drop_before" if before else "drop_after"
        if roll < p500 + pdrop + phang:
            return "hang"
        return "pass"

    return policy

