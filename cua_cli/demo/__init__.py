"""`cua demo`: a person's demonstration of a task, recorded as an episode in the agent's format.

gestures.py turns a desktop's input events into actions; recording.py records one demonstration;
driver.py is the command: the run folder, the desktops and the page.
"""
