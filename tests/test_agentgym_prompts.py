import ast
import re
import time

import pytest
import xgrammar  # what vLLM compiles guided-decoding regexes with (the [test] extra)
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_cli.agents.agentgym_prompts import (
    ACTION_PATTERNS,
    EXAMPLES,
    INSTRUCTIONS,
    TOOL_ENVS,
    TOOLS,
    WEBARENA_ACTION_PATTERN,
    WEBARENA_INSTRUCTIONS,
)
from cua_cli.envs.agentgym_presets import PRESETS, wire_action
from cua_cli.kinds import AGENTGYM_ENVS as ENVS

REACT_ENVS = [e for e in ENVS if e != "webarena"]


def pattern(env):
    return WEBARENA_ACTION_PATTERN if env == "webarena" else ACTION_PATTERNS[env]


def test_env_tables_cover_exactly_the_envs():
    assert len(ENVS) == 15 and len(set(ENVS)) == 15
    assert list(PRESETS) == list(ENVS)  # every AgentGym env the config accepts has a preset
    assert set(INSTRUCTIONS) == set(REACT_ENVS)
    assert set(ACTION_PATTERNS) == set(REACT_ENVS)
    assert set(EXAMPLES) == set(ENVS)
    assert set(TOOLS) == set(TOOL_ENVS) <= set(ENVS)


@pytest.mark.parametrize("env", REACT_ENVS)
def test_instruction_states_the_reply_format(env):
    text = INSTRUCTIONS[env]
    assert "Thought:" in text and "Action:" in text
    assert text.index("Thought:") < text.rindex("Action:")
    assert 50 < len(text.split()) < 450


@pytest.mark.parametrize("env", ENVS)
def test_examples_fullmatch_their_pattern(env):
    assert 3 <= len(EXAMPLES[env]) <= 7
    compiled = re.compile(pattern(env))
    for example in EXAMPLES[env]:
        assert compiled.fullmatch(example), (env, example)


@pytest.mark.parametrize("env", ENVS)
def test_patterns_reject_junk(env):
    compiled = re.compile(pattern(env))
    first = EXAMPLES[env][0]
    for junk in ["", "\n", "x" * 10_000, first + "\n", "\n" + first, first + "\n" + first,
                 first + " " + "x" * 10_000, "Action: " + first, " " + first + " ", first + "\n" + "y" * 9_000]:
        start = time.perf_counter()
        assert not compiled.fullmatch(junk), (env, junk[:80])
        assert time.perf_counter() - start < 0.05


@pytest.mark.parametrize("env", ENVS)
def test_patterns_use_only_guided_decoding_syntax(env):
    text = pattern(env)
    for construct in ("(?=", "(?!", "(?<=", "(?<!", "\\b", "\\1", "(?P"):
        assert construct not in text, (env, construct)
    # no unbounded repetition anywhere: every quantifier is {m,n} or `?`
    assert not unbounded_quantifiers(text), env


def unbounded_quantifiers(regex):
    """The `*` and `+` quantifiers in `regex` (outside character classes, not escaped)."""
    found, i = [], 0
    while i < len(regex):
        if regex[i] == "\\":
            i += 2
            continue
        if regex[i] == "[":
            i += 1
            while regex[i] != "]":
                i += 2 if regex[i] == "\\" else 1
        elif regex[i] in "*+":
            found.append(i)
        i += 1
    return found


def test_unbounded_quantifier_finder():
    assert unbounded_quantifiers(r"a+b") == [1]
    assert unbounded_quantifiers(r"[a+*]\+x{1,3}(?:y)*") == [18]
    assert unbounded_quantifiers(r"[\]+]{1,2}") == []


@pytest.mark.parametrize("env", ENVS)
def test_patterns_compile_for_vllm_guided_decoding(env):
    grammar = xgrammar.Grammar.from_regex(pattern(env))
    assert isinstance(grammar, xgrammar.Grammar) and str(grammar)  # compiled, not refused


def test_patterns_refuse_near_misses():
    wrong = {
        "textcraft": ["get blue orchid", "craft light blue dye using blue orchid", "Get 1 Blue Orchid"],
        "babyai": ["pick up red ball 1", "go to red ball", "go to pink ball 1", "turn around"],
        "sciworld": ["teleport to kitchen", "connect wire to", "look"],
        "alfworld": ["put apple 1 in fridge 1", "go to", "take apple 1"],
        "webshop": ["click [buy now]", "search[]", "click[a[b]]", "buy now"],
        "sqlgym": ["```sql SELECT 1 ```", "DROP TABLE users", "SELECT"],
        "searchqa": ["Canberra", "<answer></answer>", "<search>a</answer>"],
        "maze": ["move north", "up", "Move up"],
        "wordle": ["s h i r e s", "shires", "S H I R E", "s-h-i-r-e"],
        "weather": ["get_weather with Action Input: {}", 'finish with Action Input: "x"', "finish"],
        "sheet": ["check_valid_actions with Action Input: {}", "open_sheet with Action Input:{}"],
        "webarena": ["click [abc]", "click 12", "type [12]", "scroll [left]", "stop", "```click [12]```"],
    }
    for env, texts in wrong.items():
        for text in texts:
            assert not re.fullmatch(pattern(env), text), (env, text)


@pytest.mark.parametrize("env", TOOL_ENVS)
def test_tool_envs_name_every_tool(env):
    for tool in TOOLS[env]:
        assert tool in INSTRUCTIONS[env], (env, tool)
        assert re.fullmatch(ACTION_PATTERNS[env], f"{tool} with Action Input: {{}}")
    assert "with Action Input:" in INSTRUCTIONS[env]
    assert "finish" in TOOLS[env]


def test_webarena_instructions():
    text = WEBARENA_INSTRUCTIONS
    assert "```" in text and "stop [" in text
    assert "In summary, the next action I will perform is" in text
    for verb in ("click [", "type [", "hover [", "press [", "scroll [", "new_tab", "tab_focus [", "close_tab",
                 "goto [", "go_back", "go_forward"):
        assert verb in text, verb
    # the worked example's fenced action is itself a valid action
    fenced = re.findall(r"```(.+?)```", text.split("for example:", 1)[1], re.DOTALL)
    assert fenced and re.fullmatch(WEBARENA_ACTION_PATTERN, fenced[0].strip())


def test_instruction_examples_are_valid_actions():
    """What an instruction quotes after "e.g." or "for instance" is an action its pattern accepts (bar a few names)."""
    not_actions = {"mug 2", "countertop 1", "b y g g b"}
    checked = 0
    for env in REACT_ENVS:
        for run in re.findall(r"(?:e\.g\.|for instance)\s+((?:`[^`]+`(?:,\s+|\s+or\s+)?)+)", INSTRUCTIONS[env]):
            for quoted in re.findall(r"`([^`]+)`", run):
                if quoted not in not_actions:
                    assert re.fullmatch(ACTION_PATTERNS[env], quoted), (env, quoted)
                    checked += 1
    assert checked >= 25


def test_the_wire_format_keeps_examples_meaningful():
    """Every example survives the client-side transformation unchanged (up to the tool envs' prefix)."""
    for env in REACT_ENVS:
        for example in EXAMPLES[env]:
            sent = wire_action(PRESETS[env], example)
            assert sent == ("Action: " + example if env in TOOL_ENVS else example), (env, example)


# Tool envs' servers extract `NAME with Action Input: ARGS` from the POSTed text with this (their) regex and then
# require `Action:` in front of it; checks that step_action's output parses there.
_SERVER_EXTRACT = re.compile(r"\s*(.*?)\s*with\s*Action Input:\s*(.*?)$")
_SERVER_PARSE = re.compile(r".*?Action:\s*(.*?)\s*with\s*Action Input:\s*(.*?)$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("env", TOOL_ENVS)
def test_tool_examples_parse_like_the_server(env):
    for example in EXAMPLES[env]:
        m = _SERVER_EXTRACT.search(wire_action(PRESETS[env], example))
        assert m
        rebuilt = m.group(1) + " with Action Input: " + m.group(2)
        name, args = _SERVER_PARSE.match(rebuilt).groups()
        assert name in TOOLS[env]
        assert isinstance(ast.literal_eval(args), dict)  # the server evals ARGS; our examples are plain literals


@settings(max_examples=60, deadline=None)
@given(env=st.sampled_from(ENVS), text=st.text(max_size=2_000), repeat=st.integers(1, 40))
def test_patterns_answer_quickly_on_any_text(env, text, repeat):
    compiled = re.compile(pattern(env))
    example = EXAMPLES[env][0]
    for candidate in (text, example + text, text * repeat, (example[: len(example) // 2] + text) * repeat):
        start = time.perf_counter()
        compiled.fullmatch(candidate)
        assert time.perf_counter() - start < 0.1, (env, candidate[:80])
