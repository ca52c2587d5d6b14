"""The text agents: ReAct and WebArena answer formats, and the conversation cut to its budget."""

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util.budget import Budget
from cua_cli.agents import Turn
from cua_cli.agents.react import ReactAgent, parse_react
from cua_cli.agents.webarena import WebArenaAgent, parse_webarena
from cua_cli.envs import Observation
from cua_cli.errors import ParseError
from cua_cli.models import Reply


@pytest.mark.parametrize("text, thought, action", [
    ("Thought: I need sticks.\nAction: get 1 stick", "I need sticks.", "get 1 stick"),
    ("Thought:\nfirst the planks\n\nAction:\nget 2 planks", "first the planks", "get 2 planks"),
    ("Action: inventory", None, "inventory"),
    ("Thought: a query\nAction: SELECT name\nFROM t WHERE x = 'Action:'", "a query",
     "SELECT name\nFROM t WHERE x = 'Action:'"),
])
def test_react_reads_one_action(text, thought, action):
    assert parse_react(text) == (thought, action)


@pytest.mark.parametrize("text", ["no label at all", "Thought: x\nAction:   ", "Action: a\nAction: b",
                                  "Thought: x\nAction: " + "y" * 5000, "x" * 70_000])
def test_react_refuses_what_is_not_one_action(text):
    with pytest.raises(ParseError):
        parse_react(text)


@pytest.mark.parametrize("text, action, structured", [
    ("Let's think. In summary, the next action I will perform is ```click [12]```", "click [12]",
     {"type": "click", "args": ["12"], "text": "click [12]"}),
    ("```\ntype [5] [hello world] [0]\n```", "type [5] [hello world] [0]",
     {"type": "type", "args": ["5", "hello world", "0"], "text": "type [5] [hello world] [0]"}),
    ("first ```go_back``` then ```click [1]```", "go_back", {"type": "go_back", "args": [], "text": "go_back"}),
    ("```Click the big button```", "Click the big button", {"type": "text", "text": "Click the big button"}),
])
def test_webarena_reads_the_first_fence(text, action, structured):
    assert parse_webarena(text)[1:] == (action, structured)


@pytest.mark.parametrize("text", ["click [12]", "``````", "``` ```", "```click [1]", "x" * 70_000])
def test_webarena_refuses_an_answer_without_a_fenced_action(text):
    with pytest.raises(ParseError):
        parse_webarena(text)


@given(st.text(alphabet=st.sampled_from("`[]\n :ActionThought x"), max_size=3000))
def test_text_parsers_only_raise_parse_errors_and_stay_fast(text):
    for parse in (parse_react, parse_webarena):
        t = time.perf_counter()
        try:
            parse(text)
        except ParseError:
            pass
        assert time.perf_counter() - t < 0.5


class Echo:
    """A model session that always gives the same answer."""

    def __init__(self, answer):
        self.answer = answer
        self.prompts = []

    async def complete(self, messages, params):
        self.prompts.append(messages)
        return Reply(self.answer)


def test_the_conversation_keeps_task_and_current_observation_and_drops_the_oldest_steps():
    model = Echo("Thought: t\nAction: look")
    episode = ReactAgent("textcraft", history_chars=1000).start("", model)
    for step in range(30):
        asyncio.run(episode.ask(Observation(text=f"observation {step}: " + "x" * 100), Turn(), Budget(10.0)))
    messages = model.prompts[-1]
    text = [m["content"] for m in messages]
    assert messages[0]["role"] == "user" and "Action:" in text[0]        # the instructions stay
    assert text[2].startswith("observation 0:") and "left out" in text[2]  # so does the task statement
    assert text[-1].startswith("observation 29:")                          # and the current observation
    pairs = (len(messages) - 3) // 2
    assert [m["role"] for m in messages] == ["user", "assistant"] + ["user", "assistant"] * pairs + ["user"]
    kept = sum(len(t) for t in text)
    assert kept <= 1000 + len(text[0]) + len(text[2])  # within budget, but for what always stays
    steps = [int(t.split(":")[0].split()[1]) for t in text[2:] if t.startswith("observation")]
    assert steps == [0] + list(range(steps[1], 30))  # the most recent steps, in order


def test_a_short_conversation_is_sent_whole():
    model = Echo("Thought: t\nAction: look")
    episode = WebArenaAgent(history_chars=100_000).start("Click it.", model)
    for step in range(3):
        asyncio.run(episode.ask(Observation(text=f"obs {step}"), Turn(), Budget(10.0)))
    text = [m["content"] for m in model.prompts[-1]]
    assert "Your task: Click it." in text[0] and text[2:] == ["obs 0", "Thought: t\nAction: look", "obs 1",
                                                              "Thought: t\nAction: look", "obs 2"]
