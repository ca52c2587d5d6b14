import re

from hypothesis import given
from hypothesis import strategies as st

from cua_cli.runfolder.names import encode_task_id, pair_key


def test_safe_ids_are_kept():
    assert encode_task_id("click-test-2@0") == "click-test-2%400"
    assert encode_task_id("abc_DEF.1-2") == "abc_DEF.1-2"


def test_unsafe_ids_are_encoded_into_one_path_part():
    for raw in ["../x", "a/b", "", ".", "..", ".hidden", "a\\b", "x\x00y", "é/ü"]:
        enc = encode_task_id(raw)
        assert "/" not in enc and "\x00" not in enc
        assert enc not in ("", ".", "..") and not enc.startswith(".")


def test_encoding_is_injective_on_tricky_ids():
    ids = ["", "%", "%25", ".x", "%2Ex", "a/b", "a%2Fb", "..", "%2E.", "x" * 300, "x" * 299 + "y"]
    encoded = [encode_task_id(i) for i in ids]
    assert len(set(encoded)) == len(ids)
    assert all(len(e) <= 120 for e in encoded)


def test_pair_key_separates_sample():
    assert pair_key("a__1", 2) != pair_key("a", 12)
    assert pair_key("t", 3).endswith("__3")


# st.text() drops most lone surrogates; a list of characters keeps them.
ANY_ID = st.lists(st.characters() | st.characters(categories=["Cs"]), max_size=200).map("".join)


@given(ANY_ID, ANY_ID)
def test_encoding_is_safe_bounded_and_injective_on_any_string(a, b):
    ea, eb = encode_task_id(a), encode_task_id(b)
    for enc in (ea, eb):
        assert re.fullmatch(r"[A-Za-z0-9_.%~-]{1,120}", enc)
        assert enc not in (".", "..") and not enc.startswith(".")
    assert (ea == eb) == (a == b)


def test_lone_surrogates_are_encoded_like_other_characters():
    assert encode_task_id("a\udcffb") == "a%ED%B3%BFb"
    assert encode_task_id("\ud800") != encode_task_id("\udc00")
    assert pair_key("\udc80", 0) == "%ED%B2%80__0"
