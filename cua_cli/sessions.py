"""HTTP sessions per thread: connections kept alive, never shared between runner threads."""

import threading

import requests


class ThreadSessions:
    """One `requests.Session` per thread, each sending `token` (if any) as a Bearer token."""

    def __init__(self, token: str | None = None):
        self.token = token
        self._local = threading.local()

    def get(self) -> requests.Session:
        if not hasattr(self._local, "http"):
            http = requests.Session()
            if self.token:
                http.headers["Authorization"] = f"Bearer {self.token}"
            self._local.http = http
        return self._local.http
