"""OSWorld's own VLC, GIMP and Thunderbird tasks (tests/data/osworld_apps, unchanged) played end to end
by `cua check-tasks` on cua's desktops with the real apps: each task's oracle scores 1 and doing
nothing scores 0, through the getters and metrics of those families.

- vlc/59f21cfb: VLC (a plain `vlc` launch, its web interface on as on OSWorld's image) plays the
  video on the Desktop; `vlc_playing_info` reads its status.xml at the desktop's published VLC port.
- gimp/7b7617bd: the undo steps set to 100 in gimprc, read after GIMP quits (`gimp_config_file`).
- thunderbird/030eeff7: a profile unpacked by the task's setup, Thunderbird started on it, and the
  identity's auto_quote off in its prefs.js (`check_thunderbird_prefs`).

Offline: the video and the profile the tasks download from Google Drive are stand-ins made here (an
ffmpeg video; a profile with an IMAP account whose identity is id1, in OSWorld's profile folder
t5q2a5hp.default-release), given to cua under OSWorld's cache names (env.osworld.files_dir).
The oracle acts as an agent would, in pyautogui code run on the desktop: VLC's Open dialog; GIMP's
gimprc as its Preferences dialog writes it; Thunderbird closed, its prefs.js edited, started again.
Both plays first give the apps 10 s to start (settle_s; OSWorld's runs wait before the agent's first
look), so doing nothing is scored with VLC up and stopped (its web interface answers within a second
of the launch on a quiet host: 10 s leave a busy one room; GIMP and Thunderbird may still be loading,
but neither writes the setting by itself; the oracle waits for each app's window).
One check, two desktops at a time, about a minute and a half."""

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import psutil
import pytest
from helpers.cli import run_cua
from helpers.desktops import needs_desktops
from helpers.waiting import wait_for

from cua_cli.osworld.local_files import cache_key
from cua_cli.runfolder.jsonl import read_lines

DATA = Path(__file__).parent / "data" / "osworld_apps"
VLC_TASK = "59f21cfb-0120-4326-b255-a5b827b38967"
GIMP_TASK = "7b7617bd-57cc-468e-9c91-40c4ec2bcb3d"
THUNDERBIRD_TASK = "030eeff7-b492-4218-b312-701ec99ee0cc"
# Thunderbird keeps each installation's profile under a hash of its folder; this is /usr/lib/thunderbird's
# (Debian's and Ubuntu's package, OSWorld's image's too). Without it Thunderbird makes a new profile.
THUNDERBIRD_DIR, INSTALL_HASH = "/usr/lib/thunderbird", "FDC34C9F024745EB"

pytestmark = [
    pytest.mark.slow, needs_desktops,
    pytest.mark.skipif(not all(shutil.which(t) for t in ("vlc", "gimp", "thunderbird", "ffmpeg"))
                       or not os.path.isdir(THUNDERBIRD_DIR),
                       reason=f"needs VLC, GIMP, ffmpeg and Thunderbird installed in {THUNDERBIRD_DIR}")]

# -- the oracle: pyautogui code run on the desktop (after OSWorld's prefix), then DONE

WAIT = """import os, subprocess
def windows():
    return subprocess.run(['wmctrl', '-l'], capture_output=True, text=True).stdout
def until(done, what, seconds=100):
    for _ in range(seconds * 5):
        if done():
            return
        time.sleep(0.2)
    raise SystemExit(what + ': not within %d s' % seconds)
"""

MOVIE = "/home/user/Desktop/Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
PLAY = WAIT + f"""until(lambda: 'VLC media player' in windows(), 'VLC shows')
subprocess.run(['wmctrl', '-a', 'VLC media player'])
pyautogui.hotkey('ctrl', 'o')
def active():
    return subprocess.run(['xdotool', 'getactivewindow', 'getwindowname'], capture_output=True, text=True).stdout
until(lambda: 'Select one or more files to open' in active(), 'the Open dialog has the keyboard')
pyautogui.write({MOVIE!r}, interval=0.02)
pyautogui.press('enter')
until(lambda: 'Never Gonna Give You Up' in windows(), 'VLC plays the video')
"""

UNDO_STEPS = WAIT + """until(lambda: 'GNU Image Manipulation Program' in windows(), 'GIMP shows')
folder = os.path.expanduser('~/.config/GIMP/2.10')
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, 'gimprc')
kept = []
if os.path.exists(path):
    kept = [l for l in open(path).read().splitlines()
            if l.strip() and not l.startswith('#') and not l.startswith('(undo-levels ')]
with open(path, 'w') as f:
    f.write('# GIMP gimprc\\n#\\n# This is your personal gimprc file.\\n\\n')
    f.write('\\n'.join(kept + ['(undo-levels 100)']) + '\\n\\n# end of gimprc\\n')
"""

NO_QUOTE_PREFIX = WAIT + """def running():  # the setup's launch leaves a zombie until the desktop's next command
    states = subprocess.run(['ps', '-C', 'thunderbird', '-o', 'stat='], capture_output=True, text=True).stdout
    return any(not state.startswith('Z') for state in states.split())
until(lambda: 'Mozilla Thunderbird' in windows(), 'Thunderbird shows')
subprocess.run(['wmctrl', '-x', '-c', 'Mail.thunderbird'])
until(lambda: not running(), 'Thunderbird quits')
with open(os.path.expanduser('~/.thunderbird/t5q2a5hp.default-release/prefs.js'), 'a') as f:
    f.write('user_pref("mail.identity.id1.auto_quote", false);\\n')
subprocess.Popen(['/usr/bin/thunderbird'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, start_new_session=True)
until(lambda: 'Mozilla Thunderbird' in windows(), 'Thunderbird shows again')
"""


def code(text: str) -> str:
    return f"```python\n{text}```"


ORACLE = {VLC_TASK: [code(PLAY), "DONE"], GIMP_TASK: [code(UNDO_STEPS), "DONE"],
          THUNDERBIRD_TASK: [code(NO_QUOTE_PREFIX), "DONE"]}

# -- the stand-ins of the tasks' downloads

PROFILE = "t5q2a5hp.default-release"
PREFS = """// Mozilla User Preferences
user_pref("mail.account.account1.identities", "id1");
user_pref("mail.account.account1.server", "server1");
user_pref("mail.account.account2.server", "server2");
user_pref("mail.accountmanager.accounts", "account1,account2");
user_pref("mail.accountmanager.defaultaccount", "account1");
user_pref("mail.accountmanager.localfoldersserver", "server2");
user_pref("mail.identity.id1.fullName", "Anonym");
user_pref("mail.identity.id1.useremail", "anonym@example.org");
user_pref("mail.identity.id1.valid", true);
user_pref("mail.server.server1.hostname", "imap.example.org");
user_pref("mail.server.server1.name", "anonym@example.org");
user_pref("mail.server.server1.type", "imap");
user_pref("mail.server.server1.userName", "anonym@example.org");
user_pref("mail.server.server2.hostname", "Local Folders");
user_pref("mail.server.server2.name", "Local Folders");
user_pref("mail.server.server2.type", "none");
user_pref("mail.server.server2.userName", "nobody");
user_pref("mail.shell.checkDefaultClient", false);
user_pref("mailnews.start_page.enabled", false);
"""
PROFILES_INI = f"""[Profile0]
Name=default-release
IsRelative=1
Path={PROFILE}
Default=1

[General]
StartWithLastProfile=1
Version=2

[Install{INSTALL_HASH}]
Default={PROFILE}
Locked=1
"""
INSTALLS_INI = f"[{INSTALL_HASH}]\nDefault={PROFILE}\nLocked=1\n"


def profile_archive() -> bytes:
    """thunderbird-profile.tar.gz as the task's setup unpacks it into the home folder."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in ((".thunderbird/profiles.ini", PROFILES_INI), (".thunderbird/installs.ini", INSTALLS_INI),
                           (f".thunderbird/{PROFILE}/prefs.js", PREFS)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text.encode()), 0o644
            tar.addfile(info, io.BytesIO(text.encode()))
    return out.getvalue()


def downloads(folder: Path) -> Path:
    """The files the tasks' download steps fetch, under OSWorld's cache names."""
    folder.mkdir()
    for task in (VLC_TASK, THUNDERBIRD_TASK):
        domain = "vlc" if task == VLC_TASK else "thunderbird"
        example = json.loads((DATA / "examples" / domain / f"{task}.json").read_text())
        (wanted,) = [f for step in example["config"] if step["type"] == "download" for f in step["parameters"]["files"]]
        target = folder / cache_key(wanted["url"], wanted["path"])
        if task == VLC_TASK:  # ten minutes of a test card: still playing when it is scored
            subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=600:size=160x120:rate=1",
                            "-pix_fmt", "yuv420p", "-f", "mp4", str(target)], check=True, timeout=120)
        else:
            target.write_bytes(profile_archive())
    return folder


def _xvfbs() -> set:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "Xvfb"}


@pytest.mark.timeout(2400)
def test_vlc_gimp_and_thunderbird_tasks_score_one_for_the_oracle_and_zero_for_nothing(tmp_path):
    before = _xvfbs()
    oracle = tmp_path / "oracle.json"
    oracle.write_text(json.dumps(ORACLE, indent=2))
    cfg = tmp_path / "check.yaml"
    cfg.write_text(f"""
run: {{name: apps, results_dir: {tmp_path}/results}}
tasks: {{kind: osworld, osworld: {{task_list: {DATA}/test_all.json, examples_dir: {DATA}/examples}}}}
env: {{kind: osworld, url: local, local: {{max_envs: 2}},
       osworld: {{pause_s: 0.5, settle_s: 10, files_dir: {downloads(tmp_path / "files")}}}}}
agent: {{kind: osworld}}
runner: {{num_envs: 2, max_steps: 3, step_timeout_s: 150, episode_timeout_s: 420}}
""")
    r = run_cua("check-tasks", str(cfg), "--oracle", str(oracle), "--repeat", "1", timeout=2400)
    folder = next((tmp_path / "results").glob("apps-check-*"))
    report = {x["task_id"]: x for x in read_lines(folder / "report.jsonl")}
    assert {t: x["status"] for t, x in report.items()} == {VLC_TASK: "ok", GIMP_TASK: "ok", THUNDERBIRD_TASK: "ok"}, \
        json.dumps(report, indent=1) + r.stderr[-3000:]
    assert r.returncode == 0, r.stderr[-3000:]
    for task, x in report.items():
        assert (x["oracle"]["scores"], x["noop"]["scores"]) == ([1.0], [0.0]), (task, x)
    wait_for(lambda: _xvfbs() <= before, timeout=60, what="every desktop of the check is gone")
