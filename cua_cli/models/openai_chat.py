"""OpenAI-compatible /v1/chat/completions (vLLM's API) across several endpoints.

Each episode sticks to one endpoint so the server's prefix cache can reuse
the episode's growing history. New episodes go to the least-loaded endpoint;
if an episode's endpoint keeps failing, it moves to another one. With a
fleet file, every reply carries the model version its server runs, read
afresh whenever the file changes (a rolling reload changes it under us), and
a reply to a prompt with images what resized them (image_processor.py).

Screenshots go to vLLM once: each image part carries a content hash as its
`uuid`, and once a server has the image, later requests of the episode send
only the uuid. A server that lost it (restart, eviction, failover) answers
400 "Cache miss"; the request is then sent again with every image's bytes,
which costs no retry and loses no step.

A 200 whose body is not a chat completion with text (not JSON, no choices,
no message, empty or null content, a wrong type anywhere, token fields asked
for and missing) is the server's failure, retried like a 500 (BadAnswer).
A completion whose text does not parse is the agent's to judge.
"""

import asyncio
import itertools
import json
import math
import re

import pybase64

from .._util.diag import note
from .._util.httpclient import AsyncClient, BadAnswer, HttpError, Response
from .._util.retry import with_retries_async
from .._util.text import clip
from ..config.fleet_file import FleetVersions
from ..errors import ModelError
from . import Image, Params, Reply
from .image_processor import UNKNOWN, ServerProcessors
from .routing import Router

_TOKEN_NAME = re.compile(r"token_id:[0-9]{1,12}")
# After this many misses in a row on images an episode had just sent, the server evidently keeps no
# images (e.g. --mm-processor-cache-gb 0): stop sending uuids to it rather than pay twice per step.
MAX_MISS_STREAK = 2
# Of a body that is not a chat completion, the error quotes this many bytes: far more than an
# episode record keeps (it cuts error text after masking secrets), so no secret is cut here.
QUOTED_BYTES = 8192


class OpenAIChat:
    def __init__(self, mcfg, api_key: str | None, router: Router | None = None, fleet_file=None):
        self.cfg = mcfg
        self.endpoints = [e.rstrip("/") for e in mcfg.endpoints]
        self.http = AsyncClient(api_key)
        self.router = router or Router(len(self.endpoints))
        self.versions = FleetVersions(fleet_file) if fleet_file else None
        self.processors = ServerProcessors()
        self._rr = itertools.count()
        self._uuids: dict[str, bool] = {}   # endpoint -> whether it keeps images by uuid
        self._probes: dict[str, asyncio.Future] = {}  # endpoint -> its probe, while one runs

    @classmethod
    def from_config(cls, cfg, secrets: dict, router: Router | None) -> "OpenAIChat":
        fleet = cfg.resolve_path(cfg.model.fleet) if cfg.model.fleet else None
        return cls(cfg.model, secrets.get("model"), router, fleet)

    @classmethod
    def shared_state(cls, cfg, sharing) -> Router:
        """Episodes in flight per endpoint, counted across every runner."""
        return sharing.share(Router, len(cfg.model.endpoints))

    @classmethod
    def servers(cls, cfg) -> list[str]:
        return list(cfg.model.endpoints)

    def version(self, endpoint: str) -> tuple[str | None, int | None, dict]:
        """The model version and policy version the fleet file gives for this endpoint, and what
        resizes images there (image_processor.py), read together: a reload changes all three."""
        if self.versions is None:
            return None, None, UNKNOWN
        table, entries = self.versions.table(), self.versions.entries()
        return (*table.get(endpoint, (None, None)), self.processors.of(entries.get(endpoint)))

    async def takes_uuids(self, endpoint: str, budget) -> bool:
        """Whether to send images by uuid: `model.image_uuids`, or with "auto", whether the server is vLLM."""
        if self.cfg.image_uuids != "auto":
            return self.cfg.image_uuids
        if endpoint in self._uuids:
            return self._uuids[endpoint]
        probe = self._probes.get(endpoint)
        if probe is None or probe.get_loop() is not asyncio.get_running_loop():
            # One probe per endpoint, however many episodes start at once: the others await its answer.
            probe = self._probes[endpoint] = asyncio.ensure_future(self._probe(endpoint, budget))
        try:
            return await asyncio.shield(probe)
        finally:
            if probe.done() and self._probes.get(endpoint) is probe:
                del self._probes[endpoint]

    async def _probe(self, endpoint: str, budget) -> bool:
        try:
            r = await self.http.get(f"{endpoint}/models", budget.timeout(self.cfg.timeout_s))
            models = r.json().get("data") if r.ok else None
        except (HttpError, ValueError, AttributeError, RecursionError):
            return False  # ask again next time: the server may be starting
        self._uuids[endpoint] = isinstance(models, list) and any(
            isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models)
        return self._uuids[endpoint]

    def stop_uuids(self, endpoint: str) -> None:
        if self._uuids.get(endpoint):
            note(f"{endpoint} keeps no images between requests: sending every image's bytes")
        self._uuids[endpoint] = False

    def session(self, task_id: str, sample: int) -> "_Session":
        return _Session(self, self.router.acquire())


class _Session:
    def __init__(self, chat: OpenAIChat, index: int):
        self.chat = chat
        self.index = index
        self.held: set[str] = set()   # uuids of the images this episode's server has from us
        self.miss_streak = 0

    async def complete(self, messages: list[dict], params: Params) -> Reply:
        errors = []
        if self.chat.cfg.routing == "round_robin":  # the baseline sticky routing is measured against
            self.chat.router.release(self.index)
            self.index = next(self.chat._rr) % len(self.chat.endpoints)
            self.chat.router.take(self.index)
            self.held.clear()
        for _ in range(len(self.chat.endpoints)):
            endpoint = self.chat.endpoints[self.index]
            try:
                version, policy, processor = self.chat.version(endpoint)
                reply = await with_retries_async(lambda: self._post(endpoint, messages, params),
                                                 self.chat.cfg.retries, f"model {endpoint}", params.budget,
                                                 error=ModelError)
                reply.endpoint, reply.model_version, reply.policy_version = endpoint, version, policy
                if any(not isinstance(m["content"], str) and any(isinstance(p, Image) for p in m["content"])
                       for m in messages):
                    reply.image_processor = processor
                return reply
            except ModelError as e:
                errors.append(str(e))
                # Move this episode to another server; others avoid the failed one for a while.
                self.chat.router.failed(self.index)
                self.chat.router.release(self.index)
                self.index = self.chat.router.acquire(exclude=self.index)
                self.held.clear()  # a new server has none of our images
        raise ModelError("; ".join(errors))

    def close(self) -> None:
        self.chat.router.release(self.index)

    async def _post(self, endpoint: str, messages: list[dict], params: Params) -> Reply:
        c = self.chat.cfg
        head = {"model": c.name, "temperature": c.temperature, "max_tokens": c.max_tokens}
        if c.guided and params.answers.grammar:
            head["structured_outputs"] = {"regex": params.answers.grammar}
        if c.record_tokens:  # vLLM: the prompt's and the answer's token ids beside the answer
            head.update(logprobs=True, return_token_ids=True)
        elif c.record_logprobs:
            head.update(logprobs=True, return_tokens_as_token_ids=True)
        budget = params.budget
        uuids = await self.chat.takes_uuids(endpoint, budget)
        http, url = self.chat.http, f"{endpoint}/chat/completions"
        images = [p.uuid for m in messages if not isinstance(m["content"], str)
                  for p in m["content"] if isinstance(p, Image)] if uuids else []
        by_uuid = self.held.intersection(images)
        r = await http.post(url, budget.timeout(c.timeout_s), data=_body(head, messages, uuids, by_uuid),
                            interrupt=budget.interrupt)
        if by_uuid and r.status == 400 and "Cache miss" in r.text:
            self.miss_streak += 1
            if self.miss_streak >= MAX_MISS_STREAK:
                self.chat.stop_uuids(endpoint)
            r = await http.post(url, budget.timeout(c.timeout_s), data=_body(head, messages, uuids, set()),
                                interrupt=budget.interrupt)
        elif by_uuid:
            self.miss_streak = 0
        r.raise_for_status()
        self.held = set(images)  # images leave the history for good, so only this prompt's can come back
        for m in messages if images else ():  # the server has them now: their bytes can go
            for p in m["content"] if not isinstance(m["content"], str) else ():
                if isinstance(p, Image):
                    p.let_go()
        reply = _reply(r, "ids" if c.record_tokens else "names" if c.record_logprobs else None)
        if c.record_tokens:
            reply.sampling = {"temperature": c.temperature, "max_tokens": c.max_tokens,
                              "guided": bool(c.guided and params.answers.grammar)}
        return reply


def _body(head: dict, messages: list[dict], uuids: bool, by_uuid: set[str]) -> list[bytes]:
    """The request body as pieces of JSON: images as base64 PNG data URLs, with their uuid when `uuids`,
    and as the uuid alone for those in `by_uuid`.

    Pieces, so the large base64 texts are never escaped or copied by a JSON
    encoder (base64 needs no escaping), nor joined: the client sends them as
    they are.
    """
    parts = [_dumps(head)[:-1], b',"messages":[']
    for i, m in enumerate(messages):
        parts.append(b"," if i else b"")
        if isinstance(m["content"], str):
            parts.append(_dumps(m))
            continue
        parts += [b'{"role":', _dumps(m["role"]), b',"content":[']
        for j, p in enumerate(m["content"]):
            parts.append(b"," if j else b"")
            if not isinstance(p, Image):
                parts.append(_dumps(p))
                continue
            parts.append(b'{"type":"image_url",')
            if uuids:
                parts += [b'"uuid":"', p.uuid.encode(), b'",']
            if uuids and p.uuid in by_uuid:
                parts.append(b'"image_url":null}')
            else:
                # by uuid, the bytes travel once: not worth keeping their base64 in memory afterwards
                data = pybase64.b64encode(p.data()) if uuids else p.base64
                parts += [b'"image_url":{"url":"data:image/png;base64,', data, b'"}}']
        parts.append(b"]}")
    parts.append(b"]}")
    return parts


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _reply(r: Response, tokens: str | None) -> Reply:
    """The first choice of a chat completion; BadAnswer when the answer is not one.

    `tokens`: "ids" reads the token ids vLLM returns with return_token_ids (the
    prompt's and the answer's), "names" the ids it writes as token names
    ("token_id:N") with return_tokens_as_token_ids; both with their logprobs.
    """
    try:
        payload = r.json()
    except (ValueError, RecursionError):
        raise _not_completion(r, "not JSON") from None
    choices = payload.get("choices") if isinstance(payload, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    # Empty text is no answer either. vLLM sends it only when a reasoning or tool parser took the text
    # elsewhere (a server misconfigured for this use), or when the model's first token ended its answer,
    # which the body cannot tell apart. Parsed, it would be counted as the agent's failure after one try,
    # hiding a broken server in the success rate; as the server's, it is asked again (a new sample) and,
    # when it keeps coming, shows as model_error.
    if not (isinstance(content, str) and content):
        raise _not_completion(r, "no text in choices[0].message.content")
    finish = choice.get("finish_reason")
    reply = Reply(content, finish_reason=clip(finish, 40) if isinstance(finish, str) else None)
    if tokens is None:
        return reply
    logprobs = choice.get("logprobs")
    sampled = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(sampled, list) or not all(isinstance(t, dict) and _number(t.get("logprob")) for t in sampled):
        raise _not_completion(r, "no logprob for each token in choices[0].logprobs.content")
    reply.logprobs = [float(t["logprob"]) for t in sampled]
    if tokens == "names":
        if not all(isinstance(t.get("token"), str) and _TOKEN_NAME.fullmatch(t["token"]) for t in sampled):
            raise _not_completion(r, "tokens not named token_id:N (return_tokens_as_token_ids)")
        reply.token_ids = [int(t["token"][len("token_id:"):]) for t in sampled]  # at most 12 digits
        return reply
    prompt, answer = payload.get("prompt_token_ids"), choice.get("token_ids")
    # One logprob per sampled token, or a trainer's importance weights silently fall back to 1.
    if not (_ids(prompt) and _ids(answer) and len(answer) == len(reply.logprobs)):
        raise _not_completion(r, "no prompt_token_ids, or no token_ids one to each logprob (return_token_ids)")
    reply.prompt_token_ids, reply.token_ids = prompt, answer
    return reply


def _not_completion(r: Response, why: str) -> BadAnswer:
    quoted = r.content[:QUOTED_BYTES].decode("utf-8", "replace")
    more = f" ({len(r.content)} bytes)" if len(r.content) > QUOTED_BYTES else ""
    return BadAnswer(f"HTTP {r.status} but not a chat completion: {why}: {quoted!r}{more}")


def _number(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _ids(v) -> bool:
    """A list of token ids: ints of a vocabulary's size."""
    return isinstance(v, list) and all(type(t) is int and 0 <= t < 1 << 40 for t in v)
