"""The accessibility tree (OSWorld's GET /accessibility) or the focused terminal's text (GET /terminal),
read through AT-SPI with Debian's pyatspi; run with the system Python, printed as JSON on stdout.

The XML mirrors OSWorld's: one element per accessible named by its role, its name, states as st:*,
attributes as attr:*, screen position and size as cp:*, text as txt content.
"""

import json
import sys
from xml.etree import ElementTree as ET

import pyatspi
from gi.repository import GLib

NS = {name: f"https://accessibility.ubuntu.example.org/ns/{path}" for name, path in (
    ("st", "state"), ("attr", "attributes"), ("cp", "component"), ("doc", "document"),
    ("docattr", "document/attributes"), ("txt", "text"), ("val", "value"), ("act", "action"))}
MAX_DEPTH, MAX_WIDTH = 50, 1024


def tag(node) -> str:
    return (node.getRoleName() or "unknown").replace(" ", "-")


def element(node, depth: int) -> ET.Element:
    attrs = {"name": node.name or ""}
    try:
        for state in node.getState().getStates():
            # OSWorld names a state by its enum name ("selectable_text"): an XML name has no spaces
            attrs[f"{{{NS['st']}}}{pyatspi.stateToString(state).replace(' ', '_')}"] = "true"
    except Exception:  # noqa: BLE001, S110 - an accessible may lack any interface or vanish
        pass
    try:
        for kv in node.getAttributes():
            key, _, value = kv.partition(":")
            if key.isidentifier():
                attrs[f"{{{NS['attr']}}}{key}"] = value
    except Exception:  # noqa: BLE001, S110 - an accessible may lack any interface or vanish
        pass
    try:
        comp = node.queryComponent()
        attrs[f"{{{NS['cp']}}}screencoord"] = str(tuple(comp.getPosition(pyatspi.XY_SCREEN)))
        attrs[f"{{{NS['cp']}}}size"] = str(tuple(comp.getSize()))
    except NotImplementedError:
        pass
    except Exception:  # noqa: BLE001, S110 - an accessible may lack any interface or vanish
        pass
    el = ET.Element(tag(node), attrs)
    try:
        text = node.queryText()
        el.text = text.getText(0, text.characterCount)
    except NotImplementedError:
        pass
    except Exception:  # noqa: BLE001, S110 - an accessible may lack any interface or vanish
        pass
    if depth < MAX_DEPTH:
        for i, child in enumerate(node):
            if i >= MAX_WIDTH:
                break
            if child is not None:
                el.append(element(child, depth + 1))
    return el


def tree() -> dict:
    for name, uri in NS.items():
        ET.register_namespace(name, uri)
    desktop = pyatspi.Registry.getDesktop(0)
    root = ET.Element("desktop-frame", {f"{{{NS['st']}}}showing": "true"})
    for app in desktop:
        if app is not None:
            try:
                root.append(element(app, 1))
            except GLib.GError:  # an app too busy to answer in time is left out, not the whole tree
                pass
    return {"AT": ET.tostring(root, encoding="unicode")}


def terminal() -> dict:
    desktop = pyatspi.Registry.getDesktop(0)
    found = None
    for app in desktop:
        if app is None or app.name != "gnome-terminal-server":
            continue
        for frame in app:
            active = frame.getState().contains(pyatspi.STATE_ACTIVE)
            terms = pyatspi.findAllDescendants(frame, lambda n: n.getRoleName() == "terminal")
            for term in terms:
                focused = term.getState().contains(pyatspi.STATE_FOCUSED)
                text = term.queryText()
                candidate = text.getText(0, text.characterCount)
                if active and focused:
                    return {"output": candidate}
                found = candidate if found is None else found
    return {"output": found}


if __name__ == "__main__":
    print(json.dumps(tree() if sys.argv[1] == "tree" else terminal()))
