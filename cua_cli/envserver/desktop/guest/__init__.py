"""Programs that run as their own processes for a desktop: the launcher (root on the host, then the
desktop's PID 1), and inside the sandbox the executor, its pre-imported pyautogui forker, the sudo
shim and the accessibility dumper. Standard library only (plus pyautogui/mss/Xlib in the executor),
run by path, so they import each other as plain siblings (`import wire`)."""
