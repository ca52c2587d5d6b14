"""Helpers for the tests of cua's own desktops (cua_cli/envserver/desktop): when they can run, and
a small HTTP client for OSWorld's in-VM API."""

import json
import os
import shutil
import struct
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest

PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "  # OSWorld's client

needs_desktops = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("Xvfb", "openbox", "dbus-daemon", "wmctrl", "xdotool")),
    reason="cua's desktops need root (to map user namespaces) and Debian's Xvfb, openbox, dbus, wmctrl, xdotool")


def video_seconds(path) -> float:
    """How long an mp4 plays, as ffprobe reads it (fails the test if it cannot)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(path)],
                           capture_output=True, text=True, check=True)
    return float(json.loads(probe.stdout)["format"]["duration"])


def request(url: str, method: str = "GET", body=None, form=None, files=None, headers=None, timeout=150):
    """(status, content type, bytes) of one request; JSON, urlencoded form or multipart body."""
    data, hdrs = None, dict(headers or {})
    if files is not None:
        boundary = uuid.uuid4().hex
        parts = []
        for k, v in (form or {}).items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        for k, (name, content) in files.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"; filename="{name}"\r\n'
                         f'Content-Type: application/octet-stream\r\n\r\n'.encode() + content + b"\r\n")
        data = b"".join(parts) + f"--{boundary}--\r\n".encode()
        hdrs["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def run(url: str, command, shell: bool = False) -> dict:
    """POST /execute; the JSON answer (asserting HTTP 200)."""
    status, _, raw = request(url + "/execute", "POST", {"command": command, "shell": shell})
    assert status == 200, raw
    return json.loads(raw)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# Inside the desktop: select XKB's NewKeyboardNotify, press and release Shift through XTest (as
# pyautogui, xdotool and the live page's x11vnc do), and count the notices that X's core keyboard
# switched device. Each such switch makes the window manager drop and retake every key grab.
_KEYBOARD_SWITCHES = """
import ctypes
x11, xtest = ctypes.CDLL("libX11.so.6"), ctypes.CDLL("libXtst.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
display = ctypes.c_void_p(x11.XOpenDisplay(None))
opcode, event, error, major, minor = (ctypes.c_int(v) for v in (0, 0, 0, 1, 0))
assert x11.XkbQueryExtension(display, *map(ctypes.byref, (opcode, event, error, major, minor)))
NEW_KEYBOARD, CORE = ctypes.c_uint(1), ctypes.c_uint(0x100)  # XkbNewKeyboardNotifyMask, XkbUseCoreKbd
x11.XkbSelectEvents(display, CORE, NEW_KEYBOARD, NEW_KEYBOARD)
shift = x11.XKeysymToKeycode(display, ctypes.c_ulong(0xFFE1))
for down in (1, 0):
    xtest.XTestFakeKeyEvent(display, shift, down, ctypes.c_ulong(0))
x11.XSync(display, 0)  # X has handled the keys: a switch's notice is queued by now
switches, buf = 0, (ctypes.c_char * 192)()
while x11.XPending(display):
    x11.XNextEvent(display, buf)
    switches += ctypes.c_int.from_buffer(buf).value == event.value
print(switches)
"""


def keyboard_switches(url: str) -> int:
    """How many times X's core keyboard switched device for one key through XTest on the desktop."""
    return int(run(url, ["python", "-c", _KEYBOARD_SWITCHES])["output"])
