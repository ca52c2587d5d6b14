#!/usr/bin/env python3
"""How long the UI-TARS parser takes on the worst answers we know, each filled to 64 KB.

Every case is input that once made a parser backtrack, recurse or scan
quadratically (or could): numbers and spaces in a box, runs of `-` and `(`,
unclosed strings, quotes that almost end a `type` content, floods of calls,
keys and arguments. Each must parse or fail with ParseError; the script prints
the slowest of `--repeat` parses per case and the maximum over all cases, as
CPU time of the parsing thread and as wall time.

    .venv/bin/python scripts/bench_parser.py --repeat 20
"""

import argparse
import random
import time

from cua_cli.agents.uitars import MAX_RESPONSE_CHARS, ParseError, parse_response


def fill(prefix: str, unit: str, suffix: str = "") -> str:
    """prefix + unit repeated + suffix, as long as an answer may be."""
    return prefix + unit * ((MAX_RESPONSE_CHARS - len(prefix) - len(suffix)) // len(unit)) + suffix


def cases() -> dict[str, str]:
    rng = random.Random(0)
    junk = "".join(rng.choice("Action: click(start_box='(1, 2)')\n\\\"-,<>|") for _ in range(MAX_RESPONSE_CHARS))
    return {
        "numbers and spaces in a box": fill("Action: click(start_box='(", "1   ", "x)')"),
        "digits in a box": fill("Action: click(start_box='(", "9", ",1)')"),
        "minus signs": fill("Action: click(start_box=", "-", "1)"),
        "open parentheses": fill("Action: click(start_box=", "(", ")"),
        "parentheses in a string": fill("Action: click(start_box='", "(", "')"),
        "unclosed string": fill("Action: click(start_box='", "a"),
        "unclosed escapes": fill("Action: click(start_box='", "\\'"),
        "content almost ends": fill("Action: type(content='", "')x"),
        "content ends before blank lines": fill("Action: type(content='", "')" + " \n" * 8 + "1"),
        "escapes in content": fill("Action: type(content='", "\\n", "')"),
        "calls without end": fill("Action: ", "wait()\n"),
        "long type calls": fill("Action: ", "type(content='" + "\u00a0" * 1990 + "')\n"),
        "finished calls": fill("Action: ", "finished(content='" + "\u00a0" * 1990 + "')\n"),
        "drag calls": fill("Action: ", "drag(start_box='(1,2)', end_box='(3,4)')\n"),
        "keys": fill("Action: hotkey(key='", "a ", "')"),
        "one long key": fill("Action: hotkey(key='", "a", "')"),
        "arguments": fill("Action: click(", "a='', ", ")"),
        "near-miss 'Action:'": fill("", "xAction:"),
        "blank thought": fill("Thought:", " ", "Action: wait()"),
        "newlines after a call": fill("Action: wait()", "\n", "x"),
        "surrogates and NULs": fill("Action: type(content='", "\ud800\x00", "')"),
        "random junk": junk,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    worst_cpu = worst_wall = 0.0
    for name, text in cases().items():
        assert len(text) <= MAX_RESPONSE_CHARS, name
        cpu, wall = [], []
        for _ in range(args.repeat):
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                parse_response(text, 1920, 1080)
                outcome = "parsed"
            except ParseError:
                outcome = "ParseError"
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - w0)
        worst_cpu, worst_wall = max(worst_cpu, max(cpu)), max(worst_wall, max(wall))
        print(f"{name:32} {outcome:10} max {max(cpu) * 1000:7.3f} ms CPU, {max(wall) * 1000:7.3f} ms wall")
    # Wall time also counts whatever else ran on the core; CPU time is the parser's own.
    print(f"max time per parse: {worst_cpu * 1000:.3f} ms CPU ({worst_wall * 1000:.3f} ms wall)")


if __name__ == "__main__":
    main()
