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
from urllib.parse import urlsplit

from helpers.servers import LoopbackHTTPServer


class FaultProxy(LoopbackHTTPServer):
    def __init__(self, target: str, policy, hang_s: float = 10.0):
        super().__init__()
        self.target = urlsplit(target)
        self.policy = policy
        self.hang_s = hang_s
        self.faults = Counter()  # kind -> how many were injected

    def _forward(self, method: str, path: str, headers, body: bytes):
        conn = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=600)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheader("Content-Type", "application/octet-stream"), r.read()
        finally:
            conn.close()

    def serve(self, handler, method, body):
        decision = self.policy(method, handler.path, body)
        if decision != "pass":
            self.count(self.faults, decision if isinstance(decision, str) else f"http_{decision[1]}")
        if isinstance(decision, tuple):
            text = decision[2] if len(decision) > 2 else "injected fault"
            return self.reply(handler, decision[1], "application/json", json.dumps({"error": text}).encode())
        if decision == "drop_before":
            handler.close_connection = True
            return
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
        status, ctype, data = self._forward(method, handler.path, headers, body)
        if decision == "drop_after":
            handler.close_connection = True
            return
        if decision == "hang":
            self._stop.wait(self.hang_s)
            handler.close_connection = True
            return
        self.reply(handler, status, ctype, data)


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

