"""Each screenshot goes to vLLM once, then only its uuid (issue 13): real vLLM on the CPU.

A pass-through proxy (tests/helpers/faultproxy.py) stands between cua and the server,
so the tests see every request body that went over the wire; the same proxy
injects the failures of a failover.
"""

import asyncio
import io
import json
import time

import pytest
from helpers.cli import run_cua
from helpers.faultproxy import FaultProxy
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from cua_cli._util.budget import Budget
from cua_cli.config import load_config
from cua_cli.models import Image, Params, make_model
from cua_cli.models.openai_chat import _body

pytestmark = pytest.mark.slow  # a real vLLM server


def _png(seed: int) -> bytes:
    out = io.BytesIO()
    PILImage.effect_noise((160, 210), 30 + seed).convert("RGB").save(out, "PNG")
    return out.getvalue()


SHOTS = [Image(_png(i), f"step_{i:04d}.png") for i in range(3)]


def _history(n: int, shots=SHOTS) -> list[dict]:
    """A UI-TARS-like conversation after n screenshots: each one joins, none leaves."""
    messages = [{"role": "user", "content": "Click the button."}]
    for i in range(n):
        if i:
            messages.append({"role": "assistant", "content": "Thought: look.\nAction: wait()"})
        messages.append({"role": "user", "content": [shots[i]]})
    return messages


def _model(tmp_path, endpoints, name, **extra):
    path = tmp_path / f"m-{time.monotonic_ns()}.yaml"
    path.write_text(json.dumps({"model": {"provider": "openai", "endpoints": endpoints, "name": name,
                                          "max_tokens": 12, "retries": 0, **extra}}))
    return make_model(load_config(str(path)), {})


def _ask(session, n: int, shots=SHOTS) -> str:
    return asyncio.run(session.complete(_history(n, shots), Params(n, Budget(120.0)))).text


class Recorder:
    """A proxy policy that keeps each chat request's body and can start failing on demand."""

    def __init__(self):
        self.bodies: list[dict] = []
        self.fail = False

    def __call__(self, method, path, body):
        if path.endswith("/chat/completions"):
            if self.fail:
                return ("status", 503)
            self.bodies.append(json.loads(body))
        return "pass"


def _images(body: dict) -> list[tuple[str, bool]]:
    """(uuid, sent with data) for each image part of a request body."""
    return [(p.get("uuid"), p["image_url"] is not None) for m in body["messages"] if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == "image_url"]


@pytest.fixture(scope="module")
def vllm(tiny_vllm):
    served = json.loads(tiny_vllm.read_text())["servers"][0]
    return tiny_vllm, served["url"], served["served_model_name"]


@pytest.fixture(scope="module")
def reference(vllm, tmp_path_factory):
    """The answers with every image's bytes in every request (model.image_uuids: false)."""
    _, url, name = vllm
    session = _model(tmp_path_factory.mktemp("ref"), [f"{url}/v1"], name, image_uuids=False).session("t", 0)
    return [_ask(session, n) for n in (1, 2, 3)]


def test_each_screenshot_is_sent_once_and_the_answers_do_not_change(vllm, reference, tmp_path):
    _, url, name = vllm
    rec = Recorder()
    with FaultProxy(url, rec) as proxy:
        session = _model(tmp_path, [f"{proxy.url}/v1"], name).session("t", 0)  # auto: the server says vLLM
        assert [_ask(session, n) for n in (1, 2, 3)] == reference
        assert proxy.requests["/v1/models"] == 1  # asked once, then remembered
    assert [_images(b) for b in rec.bodies] == [
        [(SHOTS[0].uuid, True)],
        [(SHOTS[0].uuid, False), (SHOTS[1].uuid, True)],
        [(SHOTS[0].uuid, False), (SHOTS[1].uuid, False), (SHOTS[2].uuid, True)]]


def test_a_restarted_server_gets_the_images_again_without_an_error(vllm, reference, tmp_path):
    fleet, url, name = vllm
    rec = Recorder()
    with FaultProxy(url, rec) as proxy:
        session = _model(tmp_path, [f"{proxy.url}/v1"], name).session("t", 0)
        # Screenshots as a rollout's are: with their files, so the session lets go of their bytes once sent.
        for shot in SHOTS[:2]:
            (tmp_path / shot.file).write_bytes(shot.png)
        shots = [Image(s.png, s.file, (tmp_path / s.file).read_bytes) for s in SHOTS[:2]]
        assert _ask(session, 1, shots) == reference[0]
        assert shots[0].png is None and shots[0].uuid == SHOTS[0].uuid
        model_dir = json.loads(fleet.read_text())["servers"][0]["model"]
        r = run_cua("models", "--fleet", str(fleet), "reload", model_dir, timeout=600)  # a real restart
        assert r.returncode == 0, r.stdout + r.stderr
        assert _ask(session, 2, shots) == reference[1]  # the cache miss cost a resend (read back), not the step
    # The uuid-only request was refused (the restarted server has no images), then sent again whole.
    assert [_images(b) for b in rec.bodies[1:]] == [[(SHOTS[0].uuid, False), (SHOTS[1].uuid, True)],
                                                     [(SHOTS[0].uuid, True), (SHOTS[1].uuid, True)]]


def test_after_failover_the_new_server_gets_every_image(vllm, reference, tmp_path):
    _, url, name = vllm
    first, second = Recorder(), Recorder()
    with FaultProxy(url, first) as a, FaultProxy(url, second) as b:
        session = _model(tmp_path, [f"{a.url}/v1", f"{b.url}/v1"], name).session("t", 0)
        assert _ask(session, 1) == reference[0]
        first.fail = True  # the episode's server goes down
        assert _ask(session, 2) == reference[1]
        assert _ask(session, 3) == reference[2]
    assert [_images(body) for body in first.bodies] == [[(SHOTS[0].uuid, True)]]
    # The new server never saw the first screenshot, so it travels again; after that, uuids as usual.
    assert [_images(body) for body in second.bodies] == [
        [(SHOTS[0].uuid, True), (SHOTS[1].uuid, True)],
        [(SHOTS[0].uuid, False), (SHOTS[1].uuid, False), (SHOTS[2].uuid, True)]]


def test_servers_that_are_not_vllm_never_see_a_uuid(vllm, reference, tmp_path):
    _, url, name = vllm
    rec = Recorder()

    def not_vllm(method, path, body):  # an OpenAI-compatible server without vLLM's /v1/models
        return ("status", 404) if path.endswith("/models") else rec(method, path, body)

    with FaultProxy(url, not_vllm) as proxy:
        session = _model(tmp_path, [f"{proxy.url}/v1"], name).session("t", 0)
        assert [_ask(session, n) for n in (1, 2)] == reference[:2]
    assert rec.bodies and all("uuid" not in p for b in rec.bodies for m in b["messages"]
                              if isinstance(m["content"], list) for p in m["content"])


def test_a_server_that_keeps_no_images_is_sent_every_image_after_two_misses(vllm, reference, tmp_path, capfd):
    _, url, name = vllm
    rec = Recorder()

    def no_cache(method, path, body):  # like vLLM with --mm-processor-cache-gb 0
        if path.endswith("/chat/completions") and b'"image_url":null' in body:
            rec.bodies.append(json.loads(body))
            return ("status", 400, "Cache miss for image at index 0 but data is not provided.")
        return rec(method, path, body)

    with FaultProxy(url, no_cache) as proxy:
        model = _model(tmp_path, [f"{proxy.url}/v1"], name)
        session = model.session("t", 0)
        assert [_ask(session, n) for n in (1, 2, 3)] == reference
        assert _ask(model.session("t", 1), 2) == reference[1]  # a later episode of the same process
    refused = [b for b in rec.bodies if not all(data for _, data in _images(b))]
    assert len(refused) == 2  # steps 2 and 3 missed; this process then stopped sending uuids to the server
    assert _images(rec.bodies[-1]) == [(None, True), (None, True)]
    assert "keeps no images" in capfd.readouterr().err


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(), st.builds(lambda i: SHOTS[i], st.integers(0, 2))), max_size=6),
       st.text(), st.sets(st.sampled_from([s.uuid for s in SHOTS])), st.booleans())
def test_request_bodies_are_json_whatever_the_text(parts, role, by_uuid, uuids):
    messages = [{"role": role, "content": "x"}, {"role": "user", "content": [
        p if isinstance(p, Image) else {"type": "text", "text": p} for p in parts]}]
    body = json.loads(b"".join(_body({"model": "m", "max_tokens": 1}, messages, uuids, by_uuid)))
    assert body["model"] == "m" and body["messages"][0] == {"role": role, "content": "x"}
    for want, got in zip(parts, body["messages"][1]["content"]):
        if not isinstance(want, Image):
            assert got == {"type": "text", "text": want}
            continue
        assert got.get("uuid") == (want.uuid if uuids else None)
        if uuids and want.uuid in by_uuid:
            assert got["image_url"] is None
        else:
            assert got["image_url"]["url"] == "data:image/png;base64," + want.base64.decode()
