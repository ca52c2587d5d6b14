"""The screen recorded to an mp4 by ffmpeg, as OSWorld's /start_recording and /end_recording do: one
recording at a time per desktop, its answers and status codes OSWorld's."""

import os
import signal
import subprocess
import threading
import time

PATH = "/tmp/recording.mp4"  # OSWorld's own path; the desktop's /tmp is its own
READY_S = 30.0  # how long ffmpeg may take to start grabbing on a loaded host


class Recorder:
    def __init__(self):
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None

    def start(self, width: int, height: int) -> dict:
        with self._lock:
            if self._proc is not None:
                return {"http": 400, "json": {"status": "error", "message": "Recording is already in progress."}}
            try:  # a file left by an earlier recording must never pass for this one
                os.unlink(PATH)
            except FileNotFoundError:
                pass
            # ultrafast: ffmpeg keeps up with the screen on a loaded host and costs a desktop little CPU
            self._proc = subprocess.Popen(
                ["ffmpeg", "-y", "-loglevel", "error", "-f", "x11grab", "-draw_mouse", "1", "-framerate", "30",
                 "-video_size", f"{width}x{height}", "-i", os.environ["DISPLAY"] + ".0", "-c:v", "libx264",
                 "-preset", "ultrafast", "-pix_fmt", "yuv420p", PATH],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            # Answer once ffmpeg grabs the screen (it opens its output then): a recording stopped before
            # that would have no file at all, and a short episode on a loaded host is over that fast.
            deadline = time.monotonic() + READY_S
            while not os.path.exists(PATH) and self._proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if not os.path.exists(PATH):
                self._proc.kill()
                self._proc.wait()
                self._proc = None
                return {"http": 500, "json": {"status": "error", "message": "ffmpeg did not start recording"}}
        return {"http": 200, "json": {"status": "success", "message": "Started recording."}}

    def stop(self) -> dict:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return {"http": 400, "json": {"status": "error", "message": "No recording in progress to stop."}}
        proc.send_signal(signal.SIGINT)  # ffmpeg writes the file's index and ends
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        try:
            with open(PATH, "rb") as f:
                return {"http": 200, "type": "video/mp4", "body": f.read()}
        except OSError:
            return {"http": 404, "text": "Recording failed"}
