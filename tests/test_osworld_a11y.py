"""Accessibility-tree observations (agent.observation a11y_tree / screenshot_a11y_tree): OSWorld's table of a
desktop's AT-SPI tree (cua_cli/osworld/a11y_tree.py), fetched by env.kind osworld only when the agent reads it,
against the stand-in of OSWorld's in-VM server. Real desktops: tests/test_osworld_rollout.py."""

import asyncio
import time
from xml.etree import ElementTree as ET

import pytest
from helpers.osworld_standin import StandIn
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util.budget import Budget
from cua_cli.agents import Turn
from cua_cli.agents.osworld import OSWorldAgent
from cua_cli.envs import Observation
from cua_cli.envs.osworld import OSWorldEnv, OSWorldSession
from cua_cli.errors import EnvError
from cua_cli.models import Image, Reply
from cua_cli.osworld import a11y_tree
from cua_cli.osworld.a11y_tree import CUT_MARK, HEADER, cut, table
from cua_cli.osworld.allocation import Allocation, Allocator
from cua_cli.osworld.desktop_api import ApiSettings
from cua_cli.tasks import Task

NS = ('xmlns:st="https://accessibility.ubuntu.example.org/ns/state" '
      'xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes" '
      'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"')
SHOWN = 'st:showing="true" st:visible="true" st:enabled="true"'


def at(x, y, w=40, h=20) -> str:
    return f'cp:screencoord="({x}, {y})" cp:size="({w}, {h})"'


TREE = "".join([  # as desktops send it: no whitespace between elements
    f'<desktop-frame {NS} st:showing="true"><application name="gnome-terminal-server">',
    f'<frame name="Terminal" {SHOWN} {at(0, 0, 800, 600)}>',
    f'<menu name="File" {SHOWN} attr:class="menu" attr:description="the file menu" {at(88, 282, 39, 25)}>',
    f'<menu-item name="New Tab" st:visible="true" st:enabled="true" {at(-2147483648, -2147483648, 1, 1)}/></menu>',
    f'<push-button name="OK" {SHOWN} {at(10, 20)}/>',
    f'<push-button name="Hidden" st:showing="true" st:enabled="true" {at(10, 40)}/>',
    f'<push-button name="Greyed" st:showing="true" st:visible="true" {at(10, 60)}/>',
    f'<push-button name="" {SHOWN} {at(10, 80)}/>',
    f'<push-button name="Flat" {SHOWN} {at(10, 100, 0, 20)}/>',
    f'<push-button name="Nowhere" {SHOWN}/>',
    f'<entry name="" st:showing="true" st:visible="true" st:editable="true" {at(5, 6)}>say "hi"</entry>',
    f'<terminal name="Terminal" {SHOWN} {at(88, 307, 722, 506)}>user@desktop:~$ echo 42\n42</terminal>',
    f'<filler name="Box" {SHOWN} {at(1, 1)}/>',
    '</frame></application></desktop-frame>'])


def test_the_table_keeps_what_a_person_could_see_and_use():
    rows = table(TREE).split("\n", 1)
    assert rows[0] == HEADER
    assert rows[1] == "\n".join([
        "menu\tFile\t\"\"\tmenu\tthe file menu\t(88, 282)\t(39, 25)",  # class and description: the tree's own
        "push-button\tOK\t\"\"\t\t\t(10, 20)\t(40, 20)",
        'entry\t\t"say ""hi"""\t\t\t(5, 6)\t(40, 20)',  # editable counts as usable; quotes doubled, as OSWorld
        'terminal\tTerminal\t"user@desktop:~$ echo 42\n42"\t\t\t(88, 307)\t(722, 506)',  # one row, quoted
    ])
    # Left out: an off-screen menu item, an invisible, a disabled, a nameless, a flat and a placeless
    # button, and a filler (not a role OSWorld lists).


def test_a_tree_that_is_not_xml_is_a_value_error_even_a_billion_laughs():
    bomb = ('<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
            + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
            + ']><desktop-frame name="&j;"/>')
    for bad in ("", "<open>", "not xml", "<a/><b/>", bomb, "<a name='\udc80'/>"):
        with pytest.raises(ValueError, match="not XML"):
            table(bad)


def test_cut_keeps_the_first_tokens_and_marks_the_cut():
    text = "tag\tname\npush-button\tOK 12345"  # tag, \tname, \n, push, -button, \tOK, " ", 123, 45
    assert cut(text, 9) == text
    assert cut(text, 2) == "tag\tname" + CUT_MARK
    assert cut(text, 5) == "tag\tname\npush-button" + CUT_MARK
    assert cut(text, 8) == "tag\tname\npush-button\tOK 123" + CUT_MARK


@given(st.text())
def test_the_token_pieces_cover_any_text(text):
    pieces = [m.group() for m in a11y_tree._PIECE.finditer(text)]
    assert "".join(pieces) == text and all(pieces)


@given(st.text(), st.integers(1, 50))
def test_cut_is_the_text_or_a_marked_prefix(text, n):
    out = cut(text, n)
    assert out == text or (out.endswith(CUT_MARK) and text.startswith(out[:-len(CUT_MARK)])
                           and len(out) - len(CUT_MARK) < len(text))
    assert cut(text, n + 1) == text or len(cut(text, n + 1)) >= len(out)


# what XML can carry: no control characters but tab and line breaks, no surrogates or non-characters
_names = st.text(st.one_of(st.characters(blacklist_categories=("Cs", "Cc", "Cn")), st.sampled_from('\t\n"')),
                 max_size=12)


@st.composite
def trees(draw, depth=0):
    """Well-formed trees with hostile names, texts, states and geometry."""
    tag = draw(st.sampled_from(["push-button", "menu-item", "entry", "terminal", "label", "filler", "document-web"]))
    attrs = {"name": draw(_names)}
    for state in draw(st.lists(st.sampled_from(["showing", "visible", "enabled", "editable"]))):
        attrs[f"{{{a11y_tree.STATE}}}{state}"] = draw(st.sampled_from(["true", "false", ""]))
    for key in ("screencoord", "size"):
        attrs[f"{{{a11y_tree.COMPONENT}}}{key}"] = draw(st.one_of(
            _names, st.tuples(st.integers(-10**12, 10**12), st.integers(-5, 5000)).map(str)))
    el = ET.Element(tag, attrs)
    el.text = draw(_names)
    if depth < 3:
        el.extend(draw(st.lists(trees(depth + 1), max_size=3)))
    return el


@pytest.mark.slow  # a long property run
@given(trees())
def test_any_well_formed_tree_gives_a_row_per_element_it_keeps(root):
    out = table(ET.tostring(root, encoding="unicode"))
    lines = out.split("\n")
    assert lines[0] == HEADER
    kept = [el for el in ET.fromstring(ET.tostring(root, encoding="unicode")).iter() if a11y_tree._kept(el)]
    # One row each: a row's line breaks sit inside quotes, so rows start where the count of quotes is even.
    starts = [i for i in range(1, len(lines)) if "\n".join(lines[1:i]).count('"') % 2 == 0]
    assert [lines[i].split("\t", 1)[0] for i in starts] == [el.tag for el in kept]


# -- the env fetches the tree only when the agent reads it


@pytest.fixture
def vm(tmp_path):
    s = StandIn(tmp_path / "vm")
    yield s
    s.close()


class Leases:
    def lease(self, record):
        pass


def _session(vm, tmp_path, a11y: bool) -> OSWorldSession:
    env = OSWorldEnv(Allocator([], None), ApiSettings("", 5.0, retries=1), 0.0, 0.0, tmp_path / "cache", None,
                     a11y_tree=a11y)
    task = Task("t", "os", "anything", {"config": []}, {"func": "infeasible"})
    return OSWorldSession(env, Allocation("http://127.0.0.1:9", "d", vm.url), task, Leases())


def _budget() -> Budget:
    return Budget(5.0, time.monotonic() + 30)


def test_the_screenshot_default_fetches_no_tree(vm, tmp_path):
    obs = _session(vm, tmp_path, False).observe(_budget())
    assert obs.screenshot and obs.a11y_tree is None
    assert vm.desktop.calls == ["/screenshot"]


def test_a_tree_reading_agent_gets_the_tree_with_each_screenshot(vm, tmp_path):
    vm.desktop.accessibility = TREE
    obs = _session(vm, tmp_path, True).observe(_budget())
    assert obs.screenshot and obs.a11y_tree == TREE
    assert vm.desktop.calls == ["/screenshot", "/accessibility"]


@pytest.mark.parametrize("sent", ["<unclosed", None, 7])
def test_a_tree_that_is_not_xml_is_the_desktops_fault(vm, tmp_path, sent):
    vm.desktop.accessibility = sent
    with pytest.raises(EnvError, match="accessibility tree"):
        _session(vm, tmp_path, True).observe(_budget())


# -- the agent shows it as OSWorld's prompt agent does


class Model:
    def __init__(self):
        self.asked = []

    async def complete(self, messages, params):
        self.asked.append(messages)
        return Reply("```WAIT```", "script")


def _prompts(observation: str, steps: int = 2, history: int = 1, max_tokens: int = 10_000) -> list:
    model = Model()
    episode = OSWorldAgent(history, 0, observation, max_tokens).start("Open the file menu.", model)
    for step in range(steps):
        png = b"\x89PNG step %d" % step
        asyncio.run(episode.ask(Observation(png, 800, 600, file=f"step_{step:04d}.png", a11y_tree=TREE), Turn(),
                                _budget()))
    return model.asked


def test_each_observation_type_shows_what_it_names():
    shot, tree, both = (_prompts(o)[-1] for o in ("screenshot", "a11y_tree", "screenshot_a11y_tree"))
    row = "push-button\tOK\t"
    assert [type(p) for p in shot[-1]["content"]] == [Image] and "screenshot" in shot[0]["content"]
    assert [p["type"] for p in tree[-1]["content"]] == ["text"] and row in tree[-1]["content"][0]["text"]
    assert "accessibility tree" in tree[0]["content"] and "screenshot" not in tree[0]["content"]
    assert isinstance(both[-1]["content"][0], Image) and row in both[-1]["content"][1]["text"]
    assert "screenshot" in both[0]["content"] and "accessibility tree" in both[0]["content"]


def test_old_trees_leave_the_prompt_with_their_screenshots():
    prompt = _prompts("screenshot_a11y_tree", steps=3, history=2)[-1]
    shown = [m for m in prompt if m["role"] == "user"]
    assert len(shown) == 2 and all(HEADER in m["content"][1]["text"] for m in shown)
    assert [m["content"][0].file for m in shown] == ["step_0001.png", "step_0002.png"]


def test_the_table_is_cut_to_the_token_budget():
    text = _prompts("a11y_tree", steps=1, max_tokens=5)[-1][-1]["content"][0]["text"]
    assert text.endswith("\ntag\tname\ttext\tclass\tdescription" + CUT_MARK)
