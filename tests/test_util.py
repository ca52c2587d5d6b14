"""The plumbing in cua_cli/_util that has no other home test: the atomic write, text, diagnostics."""

import os
import signal
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cua_cli._util import diag
from cua_cli._util.atomic import write_atomic
from cua_cli._util.text import clip, percent


def test_write_atomic_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    target = tmp_path / "run" / "file.json"
    target.parent.mkdir()
    target.symlink_to(outside)
    write_atomic(target, b"new")
    assert outside.read_text() == "keep me"
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert os.listdir(target.parent) == ["file.json"]  # no temporary file left


def test_write_atomic_leaves_the_old_file_and_no_temporary_one_when_it_fails(tmp_path):
    target = tmp_path / "file.json"
    target.write_bytes(b"old")

    with pytest.raises(TypeError):
        write_atomic(target, object())  # not bytes: the write fails half-way
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.json"]


@given(st.text(max_size=500), st.integers(4, 300))
def test_clip_is_bounded_and_marks_a_cut(text, limit):
    out = clip(text, limit)
    assert len(out) <= limit
    assert out == text if len(text) <= limit else (out.endswith("...") and text.startswith(out[:-3]))


def test_percent():
    assert percent(None) == "-"
    assert percent(0.4567) == "45.7"
    assert percent(0.5, "%") == "50.0%"
    assert percent(-0.031, sign=True) == "-3.1" and percent(0.2, sign=True) == "+20.0"


def test_quiet_silences_warnings_and_notes_and_children_inherit_the_level(monkeypatch, capsys):
    monkeypatch.setenv("CUA_VERBOSITY", "1")  # and put back as it was after the test: set_level writes it
    diag.warn("shown")
    diag.detail("hidden")
    assert capsys.readouterr().err == "warning: shown\n"
    diag.set_level(diag.VERBOSE)
    diag.detail("retrying")
    assert capsys.readouterr().err == "cua: retrying\n"
    diag.set_level(diag.QUIET)
    diag.warn("not shown")
    diag.note("not shown")
    assert capsys.readouterr().err == ""
    child = subprocess.run([sys.executable, "-c", "from cua_cli._util import diag; diag.warn('x')"],
                           capture_output=True, text=True, check=True)
    assert child.stderr == ""  # a runner process speaks at the level its command was given


def test_the_cli_takes_q_and_v(tmp_path):
    """`cua -q stats` drops the warnings a folder it cannot read gives; without -q they are shown."""
    missing = tmp_path / "not-a-folder.txt"
    missing.write_text("")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    env = {k: v for k, v in os.environ.items() if k != "CUA_VERBOSITY"}
    loud = subprocess.run([sys.executable, "-m", "cua_cli", "stats", str(missing), str(run)],
                          capture_output=True, text=True, env=env)
    quiet = subprocess.run([sys.executable, "-m", "cua_cli", "-q", "stats", str(missing), str(run)],
                           capture_output=True, text=True, env=env)
    assert "warning:" in loud.stderr and "not-a-folder.txt" in loud.stderr
    assert "warning:" not in quiet.stderr
    assert loud.stdout == quiet.stdout


def test_sigusr1_prints_every_threads_stack_and_the_process_goes_on():
    code = ("import threading, time\n"
            "from cua_cli._util.signals import dump_stacks_on_sigusr1\n"
            "dump_stacks_on_sigusr1()\n"
            "def waiting_worker(): time.sleep(60)\n"
            "threading.Thread(target=waiting_worker, daemon=True).start()\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        p.send_signal(signal.SIGUSR1)
        seen = ""
        for line in iter(p.stderr.readline, ""):  # ends should the process die instead
            seen += line
            if "waiting_worker" in seen and "<module>" in seen:
                break
        assert "waiting_worker" in seen and "<module>" in seen, seen
        assert p.poll() is None, "the dump leaves the process running"
    finally:
        p.kill()
        p.wait()


def test_a_captured_stderr_without_a_file_falls_back_to_the_real_one(monkeypatch):
    import faulthandler
    import io

    from cua_cli._util.signals import dump_stacks_on_sigusr1
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # as click's CliRunner captures it
    try:
        dump_stacks_on_sigusr1()  # no error
    finally:
        faulthandler.unregister(signal.SIGUSR1)
