"""Text for people: percentages, and values cut to a length a message can hold."""


def percent(x: float | None, unit: str = "", sign: bool = False) -> str:
    """0.4567 -> "45.7" + unit ("%", or nothing where a column says "%" or "points"); None -> "-"."""
    return "-" if x is None else f"{100 * x:{'+' if sign else ''}.1f}{unit}"


def clip(text: str, limit: int = 200) -> str:
    """`text` cut to at most `limit` characters, "..." marking a cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
