"""OpenAI-compatible /v1/chat/completions (vLLM's API) across several endpoints.

Each episode sticks to one endpoint so the server's prefix cache can reuse
the episode's growing history. New episodes go to the least-loaded endpoint;
if an episode's endpoint keeps failing, it moves to another one.
"""

import threading

import requests

from ..agents.uitars import GUIDED_REGEX
from ..retry import InfraError, with_retries
from . import Reply, Request
from .routing import Router


class OpenAIChat:
    def __init__(self, mcfg, api_key: str | None, router: Router | None = None):
        self.cfg = mcfg
        self.endpoints = [e.rstrip("/") for e in mcfg.endpoints]
        self.api_key = api_key
        self.router = router or Router(len(self.endpoints))
        self._local = threading.local()

    def http(self) -> requests.Session:
        if not hasattr(self._local, "http"):
            self._local.http = requests.Session()
            if self.api_key:
                self._local.http.headers["Authorization"] = f"Bearer {self.api_key}"
        return self._local.http

    def episode(self, task_id: str, sample: int) -> "_Episode":
        return _Episode(self, self.router.acquire())


class _Episode:
    def __init__(self, chat: OpenAIChat, index: int):
        self.chat = chat
        self.index = index

    def complete(self, req: Request) -> Reply:
        errors = []
        for _ in range(len(self.chat.endpoints)):
            endpoint = self.chat.endpoints[self.index]
            try:
                text = with_retries(lambda: self._post(endpoint, req), self.chat.cfg.retries,
                                    f"model {endpoint}", req.should_stop)
                return Reply(text, endpoint)
            except InfraError as e:
                errors.append(str(e))
                # Move this episode to another server; others avoid the failed one for a while.
                self.chat.router.failed(self.index)
                self.chat.router.release(self.index)
                self.index = self.chat.router.acquire(exclude=self.index)
        raise InfraError("; ".join(errors))

    def close(self) -> None:
        self.chat.router.release(self.index)

    def _post(self, endpoint: str, req: Request) -> str:
        c = self.chat.cfg
        body = {"model": c.name, "messages": req.messages, "temperature": c.temperature,
                "max_tokens": c.max_tokens}
        if c.guided:
            body["structured_outputs"] = {"regex": GUIDED_REGEX}
        r = self.chat.http().post(f"{endpoint}/chat/completions", json=body, timeout=req.timeout)
        r.raise_for_status()
        try:
            return r.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise InfraError(f"model {endpoint}: malformed answer: {r.text[:200]!r}") from None
