"""OpenAI-compatible /v1/chat/completions (vLLM's API) across several endpoints.

Each episode sticks to one endpoint so the server's prefix cache can reuse
the episode's growing history; if that endpoint keeps failing, the episode
moves on to the next one.
"""

import itertools
import threading

import requests

from ..retry import InfraError, with_retries
from . import Reply, Request


class OpenAIChat:
    def __init__(self, mcfg, api_key: str | None):
        self.cfg = mcfg
        self.endpoints = [e.rstrip("/") for e in mcfg.endpoints]
        self.api_key = api_key
        self._next = itertools.count()
        self._local = threading.local()

    def http(self) -> requests.Session:
        if not hasattr(self._local, "http"):
            self._local.http = requests.Session()
            if self.api_key:
                self._local.http.headers["Authorization"] = f"Bearer {self.api_key}"
        return self._local.http

    def episode(self, task_id: str, sample: int) -> "_Episode":
        return _Episode(self, next(self._next) % len(self.endpoints))


class _Episode:
    def __init__(self, chat: OpenAIChat, start: int):
        self.chat = chat
        self.index = start

    def complete(self, req: Request) -> Reply:
        errors = []
        n = len(self.chat.endpoints)
        for _ in range(n):
            endpoint = self.chat.endpoints[self.index]
            try:
                text = with_retries(lambda: self._post(endpoint, req), self.chat.cfg.retries,
                                    f"model {endpoint}", req.should_stop)
                return Reply(text, endpoint)
            except InfraError as e:
                errors.append(str(e))
                self.index = (self.index + 1) % n
        raise InfraError("; ".join(errors))

    def _post(self, endpoint: str, req: Request) -> str:
        c = self.chat.cfg
        body = {"model": c.name, "messages": req.messages, "temperature": c.temperature,
                "max_tokens": c.max_tokens}
        r = self.chat.http().post(f"{endpoint}/chat/completions", json=body, timeout=req.timeout)
        r.raise_for_status()
        try:
            return r.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise InfraError(f"model {endpoint}: malformed answer: {r.text[:200]!r}") from None
