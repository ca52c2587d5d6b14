"""Secrets are masked in every spelling they leak in, not only verbatim."""

import base64
import html
import json
import re
from urllib.parse import quote, quote_plus

from hypothesis import assume, given
from hypothesis import strategies as st

from cua_cli._util.redact import Redactor

# "*" is left out: a secret made of stars would be found in the mask itself.
SECRETS = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="*"), min_size=1, max_size=24)
AROUND = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="*"), max_size=12)


def b64_forms(raw: bytes) -> list[str]:
    return [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("=")]


def spellings(secret: str, before: bytes, after: bytes) -> list[str]:
    raw = secret.encode()
    return [
        secret, quote(secret), quote(secret, safe=""), quote_plus(secret),
        re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(secret, safe="")),
        quote(quote(secret, safe=""), safe=""),
        json.dumps(secret, ensure_ascii=False)[1:-1], json.dumps(secret)[1:-1],
        json.dumps(json.dumps(secret))[1:-1],
        repr(secret)[1:-1], ascii(secret)[1:-1], repr(raw)[2:-1], html.escape(secret),
        *b64_forms(raw), *b64_forms(b"user:" + raw), *b64_forms(before + raw + after),
    ]


@given(st.lists(SECRETS, min_size=1, max_size=2), AROUND, AROUND, st.binary(max_size=4), st.binary(max_size=4))
def test_no_spelling_of_a_secret_survives(secrets, left, right, before, after):
    redact = Redactor(secrets).text
    for secret in secrets:
        for form in spellings(secret, before, after):
            assert form not in redact(left + form + right), form


def test_realistic_leaks_are_masked_and_other_text_is_kept():
    token = "sk-Ab3/x+9_Zq~é!"
    r = Redactor([token, "hunter2"])
    basic = base64.b64encode(b"alice:" + token.encode()).decode()
    text = (f"GET https://api.example.com/v1?key={quote_plus(token)}&q=1 failed: 401\n"
            f"Authorization: Basic {basic}\nbody: {json.dumps({'api_key': token})}\n"
            f"retry with {quote(token).lower()} and password hunter2 in http://bob:pw@host/")
    out = r.text(text)
    assert token not in out and quote_plus(token) not in out and basic not in out
    assert json.dumps(token)[1:-1] not in out and "hunter2" not in out and "bob:pw" not in out
    assert "GET https://api.example.com/v1?key=***&q=1 failed: 401" in out and "Authorization: Basic ***" in out
    plain = "nothing secret here, just YWxpY2U6 text"
    assert Redactor([token]).text(plain) == plain


def test_a_secret_containing_another_is_masked_whole_and_obj_masks_keys():
    r = Redactor(["abc", "xxabcxx"])
    assert r.text("1 xxabcxx 2 abc") == "1 *** 2 ***"
    assert r.obj({"abc": ["xxabcxx", ("abc", 3)], "n": None}) == {"***": ["***", ["***", 3]], "n": None}


def test_a_secret_with_a_lone_surrogate_is_masked_in_its_escaped_spellings():
    r = Redactor(["to\udcffken"])
    assert r.text("a to\udcffken b") == "a *** b"
    assert r.text(json.dumps({"k": "to\udcffken"})) == '{"k": "***"}'
    assert r.text("\ud800 token") == "\ud800 token"  # other text, lone surrogates and all, is kept


# -- URL userinfo, malformed URLs too ---------------------------------------------------

# A password may hold anything a URL can carry in a word: `/`, `@`, `#`, `?`, `:`, `%`.
PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters='"<>*'),
                    min_size=1, max_size=16)
HOSTS = st.from_regex(r"[a-z0-9.-]{1,12}(:[0-9]{1,5})?", fullmatch=True)
PATHS = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters='"<>*@'), max_size=12)
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="*@"), max_size=12)
SCHEMES = st.sampled_from(["http://", "https://", "mysql://", "mysql+pymysql://", "HTTP://", "http%3A%2F%2F", ""])


@given(SCHEMES, st.from_regex(r"[a-z][a-z0-9_.-]{0,7}", fullmatch=True), PASSWORDS, HOSTS, PATHS, TEXT, TEXT,
       st.booleans())
def test_url_passwords_never_survive_however_malformed_the_url(scheme, user, password, host, path, left, right,
                                                              encoded):
    """Userinfo is masked without the Redactor knowing the password: with or without a
    scheme, a password holding `/`, `@`, `#` or `?`, raw or percent-encoded, in any text."""
    password = quote(password, safe="") if encoded else password
    # ... nor in the mask itself (a password "@" shows in "***@" without having survived), nor in the
    # "/" this test puts between host and path
    assume(not any(password in part for part in (scheme, user, f"{host}/{path}", left, right, "***@")))
    out = Redactor([]).text(f"{left} {scheme}{user}:{password}@{host}/{path} {right}")
    assert password not in out and "***@" in out, out


def test_userinfo_of_config_urls_is_a_secret_in_every_spelling(monkeypatch):
    from types import SimpleNamespace

    from cua_cli._util.redact import read_secrets
    monkeypatch.setenv("DB_URL", "mysql://dart:s3cr/et@pw@db:3306/dart")
    cfg = SimpleNamespace(source="exp.yaml", env=SimpleNamespace(token_env=None, url="http://u:env-pass#1@envs:8080"),
                          model=SimpleNamespace(api_key_env=None, endpoints=["https://m:model%2Fpass@gpu:8000/v1"]),
                          storage=SimpleNamespace(mysql=SimpleNamespace(url_env="DB_URL")))
    secrets = read_secrets(cfg)
    r = Redactor(secrets.values())
    text = ("connect failed for s3cr/et@pw (s3cr%2Fet%40pw), env-pass#1 refused, "
            f"{base64.b64encode(b'm:model/pass').decode()} and mysql://dart:s3cr/et@pw@db:3306/dart")
    out = r.text(text)
    for leak in ("s3cr", "env-pass", "model/pass", "model%2Fpass", base64.b64encode(b"m:model/pass").decode()):
        assert leak not in out, (leak, out)
    assert secrets["mysql"] == "mysql://dart:s3cr/et@pw@db:3306/dart"  # the roles keep their values
