"""Office Open XML files (.xlsx, .pptx, .docx) are zip packages: before a library opens one, its
declared sizes are bounded, so a file from the desktop cannot inflate without limit (Python's
zipfile never inflates a member past the size its directory declares)."""

import zipfile

MAX_INFLATED = 1 << 30   # all members together, once inflated
MAX_MEMBERS = 20_000


def checked(path) -> str:
    """`path`, once its package is known to inflate to at most MAX_INFLATED bytes in at most
    MAX_MEMBERS members; ValueError (or BadZipFile) otherwise."""
    with zipfile.ZipFile(path) as z:
        members = z.infolist()
    if len(members) > MAX_MEMBERS:
        raise ValueError(f"{path} holds {len(members)} parts, more than {MAX_MEMBERS}")
    if sum(m.file_size for m in members) > MAX_INFLATED:
        raise ValueError(f"{path} inflates to more than {MAX_INFLATED} bytes")
    return str(path)
