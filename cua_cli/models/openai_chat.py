"""OpenAI-compatible /v1/chat/completions (vLLM's API) across several endpoints.

Each episode sticks to one endpoint so the server's prefix cache can reuse
the episode's growing history. New episodes go to the least-loaded endpoint;
if an episode's endpoint keeps failing, it moves to another one. With a
fleet file, every reply carries the model version its server runs, read
afresh whenever the file changes (a rolling reload changes it under us).
"""

import itertools
import os
import threading

import requests

from ..agents.uitars import GUIDED_REGEX
from ..fleet.server import api_base, read_fleet
from ..errors import InfraError, ModelError
from ..retry import with_retries
from . import Reply, Request
from .routing import Router


class OpenAIChat:
    def __init__(self, mcfg, api_key: str | None, router: Router | None = None, fleet_file=None):
        self.cfg = mcfg
        self.endpoints = [e.rstrip("/") for e in mcfg.endpoints]
        self.api_key = api_key
        self.router = router or Router(len(self.endpoints))
        self.fleet_file = fleet_file
        self._versions: tuple[float, dict] = (-1.0, {})
        self._rr = itertools.count()
        self._local = threading.local()

    def version(self, endpoint: str) -> str | None:
        """The model version the fleet file gives for this endpoint."""
        if not self.fleet_file:
            return None
        try:
            mtime = os.stat(self.fleet_file).st_mtime
            if mtime != self._versions[0]:
                servers = read_fleet(self.fleet_file)["servers"]
                self._versions = (mtime, {api_base(s["url"]): s.get("model_version") or s.get("model")
                                          for s in servers})
        except (OSError, ValueError):
            pass  # mid-rewrite or gone: keep the versions last read
        return self._versions[1].get(endpoint)

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
        if self.chat.cfg.routing == "round_robin":  # the baseline sticky routing is measured against
            self.chat.router.release(self.index)
            self.index = next(self.chat._rr) % len(self.chat.endpoints)
            self.chat.router.take(self.index)
        for _ in range(len(self.chat.endpoints)):
            endpoint = self.chat.endpoints[self.index]
            try:
                version = self.chat.version(endpoint)
                reply = with_retries(lambda: self._post(endpoint, req), self.chat.cfg.retries,
                                     f"model {endpoint}", req.should_stop)
                reply.endpoint, reply.model_version = endpoint, version
                return reply
            except InfraError as e:
                errors.append(str(e))
                # Move this episode to another server; others avoid the failed one for a while.
                self.chat.router.failed(self.index)
                self.chat.router.release(self.index)
                self.index = self.chat.router.acquire(exclude=self.index)
        raise ModelError("; ".join(errors))

    def close(self) -> None:
        self.chat.router.release(self.index)

    def _post(self, endpoint: str, req: Request) -> Reply:
        c = self.chat.cfg
        body = {"model": c.name, "messages": req.messages, "temperature": c.temperature,
                "max_tokens": c.max_tokens}
        if c.guided:
            body["structured_outputs"] = {"regex": GUIDED_REGEX}
        if c.record_logprobs:
            body.update(logprobs=True, return_tokens_as_token_ids=True)
        r = self.chat.http().post(f"{endpoint}/chat/completions", json=body, timeout=req.timeout)
        r.raise_for_status()
        try:
            choice = r.json()["choices"][0]
            content = choice["message"]["content"]
            if content is not None and not isinstance(content, str):
                raise TypeError("content is not text")
            reply = Reply(content or "")
            if c.record_logprobs:
                # vLLM names sampled tokens "token_id:N" when asked for ids.
                content = choice["logprobs"]["content"]
                reply.token_ids = [int(t["token"].split(":", 1)[1]) for t in content]
                reply.logprobs = [t["logprob"] for t in content]
            return reply
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError):
            raise InfraError(f"model {endpoint}: malformed answer: {r.text!r}") from None
