"""`ktui export --web-config FILE` read and checked (ktui/web_config.py):
the exporter toolkit's keys ktui honours, each one it does not refused by
name at file:line:col, relative paths from the file's directory, bcrypt
hashes, certificates and keys that must load; and the basic auth check
(its cache, the decoy check for unknown users). The server side is
tests/unit/test_export_tls.py."""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
from pathlib import Path

import bcrypt
import pytest
from click.testing import CliRunner

from ktui import web_config
from ktui.cli import main
from ktui.lang.model import KtuiError
from ktui.web_config import BasicAuth, WebConfigError, basic_credentials, load_web_config
from tests.pki import bcrypt_hash, make_pki

TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"  # lines 1-3


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def conf(pki, tmp_path):
    """Writes a web config beside copies of the pki files; returns its path."""
    for f in pki.dir.iterdir():
        shutil.copy(f, tmp_path)

    def write(text: str, name: str = "web.yml"):
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


def error(path) -> str:
    with pytest.raises(WebConfigError) as err:
        load_web_config(path)
    text = str(err.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def header(user: str | bytes, password: str | bytes) -> str:
    raw = (user.encode() if isinstance(user, str) else user) + b":" + (
        password.encode() if isinstance(password, str) else password)
    return "Basic " + base64.b64encode(raw).decode()


# ---------------------------------------------------------------- what loads


def test_tls_with_verified_client_certificates_and_users(conf):
    path = conf(TLS + "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
                "  min_version: TLS12\n  max_version: TLS13\n"
                f"basic_auth_users:\n  alice: {bcrypt_hash('a')}\n  bob: {bcrypt_hash('b')}\n")
    web = load_web_config(path)
    assert web.scheme == "https" and web.source == str(path)
    assert web.tls.verify_mode == ssl.CERT_REQUIRED
    assert (web.tls.minimum_version, web.tls.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert web.summary == "TLS 1.2 to 1.3, client certificates required; basic auth for 2 users"
    assert web.authorized(header("alice", "a")) and web.authorized(header("bob", "b"))
    assert not web.authorized(header("alice", "b")) and not web.authorized(None)


def test_defaults_are_the_toolkits(conf):
    web = load_web_config(conf(TLS))
    assert web.tls.verify_mode == ssl.CERT_NONE  # NoClientCert
    assert web.tls.minimum_version == ssl.TLSVersion.TLSv1_2  # TLS12, as the toolkit
    assert web.auth is None and web.authorized(None)
    assert web.summary == "TLS 1.2 to 1.3; no basic auth"


def test_verify_if_given_and_tls13_only(conf):
    web = load_web_config(conf(TLS + "  client_ca_file: ca.crt\n  client_auth_type: VerifyClientCertIfGiven\n"
                               "  min_version: TLS13\n"))
    assert web.tls.verify_mode == ssl.CERT_OPTIONAL
    assert web.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert web.summary == "TLS 1.3 only, client certificates verified if given; no basic auth"


@pytest.mark.parametrize("text", ["", "# nothing\n", "tls_server_config:\nbasic_auth_users: {}\n",
                                  "http_server_config: {http2: false}\n", "tls_server_config: {}\n"])
def test_an_empty_config_is_plain_http_without_auth(conf, text):
    web = load_web_config(conf(text))
    assert web.scheme == "http" and web.tls is None and web.auth is None
    assert web.summary == "no TLS; no basic auth"


def test_basic_auth_without_tls_says_passwords_travel_in_the_clear(conf):
    web = load_web_config(conf(f"basic_auth_users:\n  alice: {bcrypt_hash('a')}\n"))
    assert web.scheme == "http" and web.summary == "no TLS; basic auth for 1 user, passwords in the clear"


def test_relative_paths_are_from_the_config_files_directory(conf, tmp_path, monkeypatch):
    path = conf(TLS + "  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # nothing of the kind here
    assert load_web_config(path).scheme == "https"
    # and a missing one is named by the path it was looked for at
    text = error(conf("tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n"))
    assert text == (f"{path}:2:14: tls_server_config: cert_file: {tmp_path / 'nope.crt'}: "
                    "cannot open: No such file or directory")


def test_a_config_given_by_a_relative_path_finds_its_files_too(conf, tmp_path, monkeypatch):
    conf(TLS)
    monkeypatch.chdir(tmp_path.parent)
    assert load_web_config(os.path.join(tmp_path.name, "web.yml")).scheme == "https"


def test_absolute_paths_work_from_anywhere(pki, tmp_path):
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {pki.server[0]}\n  key_file: {pki.server[1]}\n")
    assert load_web_config(path).scheme == "https"


def test_node_exporters_documented_example_says_what_it_lacks(conf):
    """The toolkit's docs/web-config.yml, verbatim but for the file names:
    its rate_limit is refused by name; without it, the file works."""
    example = ("# TLS and basic authentication configuration example.\n#\n"
               "# Additionally, a certificate and a key file are needed.\n"
               "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\n"
               "# Usernames and passwords required to connect.\n"
               "# Passwords are hashed with bcrypt: https://github.com/prometheus/exporter-toolkit/"
               "blob/master/docs/web-configuration.md#about-bcrypt.\n"
               "basic_auth_users:\n"
               "  alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze\n"
               "  bob: $2y$10$hLqFl9jSjoAAy95Z/zw8Ye8wkdMBM8c5Bn1ptYqP/AXyV0.oy0S8m\n\n"
               "# Rate limiting requests on the endpoint using a token bucket\n"
               "rate_limit:\n"
               '  interval: "1s" # time interval between two requests, set to 0 to disable rate limiter\n'
               "  burst: 20 # and permits a burst of up to 20 requests.\n")
    path = conf(example)
    assert error(path).startswith(f"{path}:15:1: rate_limit: not supported by ktui export")
    web = load_web_config(conf(example[:example.index("\n# Rate limiting")]))
    assert web.summary == "TLS 1.2 to 1.3; basic auth for 2 users"


# ---------------------------------------------------------------- what is refused, where


REFUSED = [
    # (appended to TLS, line:col, the start of the message)
    ("  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "4:3", "tls_server_config: cipher_suites: Go's cipher suite names"),
    ("  curve_preferences: [X25519]\n", "4:3", "tls_server_config: curve_preferences: Go's curve names"),
    ("  prefer_server_cipher_suites: true\n", "4:3", "tls_server_config: prefer_server_cipher_suites: not supported"),
    ("  client_allowed_sans: [prometheus]\n", "4:3", "tls_server_config: client_allowed_sans: not supported"),
    ("  cert: '-----BEGIN CERTIFICATE-----'\n", "4:3", "tls_server_config: cert: inline certificates"),
    ("  key: secret\n", "4:3", "tls_server_config: key: inline keys"),
    ("  client_ca: pem\n", "4:3", "tls_server_config: client_ca: an inline client CA"),
    ("  min_versoin: TLS12\n", "4:3", "tls_server_config: unknown key 'min_versoin' (did you mean 'min_version'?)"),
    ("  client_auth_type: RequestClientCert\n", "4:21",
     "tls_server_config: client_auth_type RequestClientCert: Python's ssl cannot ask"),
    ("  client_auth_type: RequireAnyClientCert\n", "4:21",
     "tls_server_config: client_auth_type RequireAnyClientCert: Python's ssl cannot require"),
    ("  client_auth_type: RequireClientCert\n", "4:21",
     "tls_server_config: client_auth_type RequireClientCert: Python's ssl cannot require"),
    ("  client_auth_type: Sometimes\n", "4:21", "tls_server_config: client_auth_type: unknown value 'Sometimes'"),
    ("  client_auth_type: RequireAndVerifyClientCert\n", "4:21",
     "tls_server_config: client_auth_type RequireAndVerifyClientCert needs client_ca_file"),
    ("  client_auth_type: VerifyClientCertIfGiven\n", "4:21",
     "tls_server_config: client_auth_type VerifyClientCertIfGiven needs client_ca_file"),
    ("  client_ca_file: ca.crt\n", "4:19",
     "tls_server_config: client_ca_file is set but client_auth_type is NoClientCert"),
    ("  client_ca_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n", "4:19",
     "tls_server_config: client_ca_file: "),
    ("  min_version: TLS14\n", "4:16", "tls_server_config: min_version: unknown TLS version 'TLS14'"),
    ("  max_version: 1.3\n", "4:16", "tls_server_config: max_version: expected a string"),
    ("  min_version: TLS13\n  max_version: TLS12\n", "4:16",
     "tls_server_config: min_version TLS13 is above max_version TLS12"),
]
TOP_REFUSED = [
    ("rate_limit:\n  interval: 1s\n  burst: 20\n", "1:1", "rate_limit: not supported by ktui export"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: deny\n", "2:3",
     "http_server_config: headers: extra response headers are not supported"),
    ("http_server_config:\n  http2: true\n", "2:10", "http_server_config: http2: true: ktui export serves HTTP/1.1"),
    ("basic_auth_user:\n  alice: x\n", "1:1", "unknown key 'basic_auth_user' (did you mean 'basic_auth_users'?)"),
    ("bogus: 1\nrate_limit: {}\n", "1:1", "unknown key 'bogus'; expected one of: tls_server_config, "
                                          "basic_auth_users, http_server_config"),
    ("tls_server_config:\n  key_file: server.key\n", "2:3",
     "tls_server_config: missing key 'cert_file' (TLS needs a certificate and its key)"),
    ("tls_server_config:\n  cert_file: server.crt\n", "2:3", "tls_server_config: missing key 'key_file'"),
    ("tls_server_config: server.crt\n", "1:20", "tls_server_config: expected a mapping, got a string"),
    ("tls_server_config:\n  cert_file: server.crt\n  cert_file: server.crt\n  key_file: server.key\n", "3:3",
     "tls_server_config: duplicate key 'cert_file' (first given on line 2)"),
    ("- a\n", "1:1", "a web config is a mapping (tls_server_config:, basic_auth_users:), got a list"),
    ("a: &x 1\nb: *x\n", "2:4", "aliases (*x) are not allowed in a web config"),
    ("tls_server_config: {cert_file: [\n", "2:1", "YAML syntax error"),
]


@pytest.mark.parametrize("text,where,message", [(TLS + t, w, m) for t, w, m in REFUSED] + TOP_REFUSED,
                         ids=[m.split(":")[1 if m.startswith("tls_") else 0][:40].strip() + f"@{w}"
                              for _, w, m in REFUSED + TOP_REFUSED])
def test_each_key_ktui_cannot_honour_is_refused_by_name_where_it_is(conf, text, where, message):
    path = conf(text)
    assert error(path).startswith(f"{path}:{where}: {message}")


def test_tls_below_1_2_is_refused_where_openssl_will_not_speak_it(conf):
    if ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).security_level == 0 or ssl.OPENSSL_VERSION_INFO < (3,):
        pytest.skip("this OpenSSL speaks TLS 1.0")
    path = conf(TLS + "  min_version: TLS10\n")
    assert error(path).startswith(f"{path}:4:16: tls_server_config: min_version TLS10: OpenSSL 3")
    assert "use TLS12 or TLS13" in error(path)


def test_not_utf8_and_not_a_file_are_one_line(conf, tmp_path):
    path = tmp_path / "web.yml"
    path.write_bytes(b"basic_auth_users:\n  \xff: x\n")
    assert error(path) == f"{path}:2:3: not UTF-8 text (byte 0xff); a web config is a YAML text file"
    assert error(tmp_path) == f"{tmp_path}: not a regular file"
    assert error(tmp_path / "none.yml") == f"{tmp_path / 'none.yml'}: cannot open: No such file or directory"


# ---------------------------------------------------------------- hashes and users


def test_a_value_that_is_not_a_bcrypt_hash_is_refused_at_load_without_echoing_it(conf):
    path = conf("basic_auth_users:\n  alice: doe\n")
    assert error(path) == (f"{path}:2:10: basic_auth_users: user 'alice': not a bcrypt hash (one looks like "
                           "$2y$10$ and 53 characters: htpasswd -nBC 10 \"\" | tr -d ':\\n')")
    good = bcrypt_hash("a")
    for bad in ("$1$abcdefgh$" + "x" * 22,  # md5-crypt
                good[:4] + "03" + good[6:],  # cost 3: below bcrypt's 4
                good[:-1],  # one character short
                good + "x",
                "$2x$" + good[4:]):  # the broken 2011 variant
        text = error(conf(f"basic_auth_users:\n  alice: '{bad}'\n"))
        assert ":2:10: basic_auth_users: user 'alice': not a bcrypt hash" in text and bad not in text
    assert ":2:9: basic_auth_users: user 'alice': not a bcrypt hash" in error(conf("basic_auth_users:\n  alice:\n"))
    assert ":2:10: basic_auth_users: user 'alice': expected a string" in error(
        conf("basic_auth_users:\n  alice: [x]\n"))


@pytest.mark.parametrize("variant", ["$2a$", "$2b$", "$2y$"])
def test_each_bcrypt_variant_is_accepted_and_checks(conf, variant):
    hashed = variant + bcrypt_hash("pw")[4:]
    web = load_web_config(conf(f"basic_auth_users:\n  alice: {hashed}\n"))
    assert web.authorized(header("alice", "pw")) and not web.authorized(header("alice", "px"))


def test_user_names(conf):
    h = bcrypt_hash("a")
    path = conf(f"basic_auth_users:\n  alice: {h}\n  alice: {h}\n")
    assert error(path) == f"{path}:3:3: basic_auth_users: duplicate user 'alice' (first given on line 2)"
    path = conf(f"basic_auth_users:\n  'a:b': {h}\n")
    assert error(path) == f"{path}:2:3: basic_auth_users: user 'a:b': a basic auth user name cannot contain ':'"
    path = conf(f"basic_auth_users: [alice, {h}]\n")
    assert error(path).startswith(f"{path}:1:19: basic_auth_users: expected a mapping of user names")
    web = load_web_config(conf(f"basic_auth_users:\n  1234: {h}\n  émile: {h}\n"))
    assert web.authorized(header("1234", "a")) and web.authorized(header("émile".encode(), b"a"))


# ---------------------------------------------------------------- certificates and keys


def test_files_that_do_not_hold_what_they_should(conf):
    path = conf("tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n")
    assert error(path) == f"{path}:2:14: tls_server_config: cert_file: {path.parent / 'server.key'}: not a PEM certificate"
    path = conf("tls_server_config:\n  cert_file: server.crt\n  key_file: server.crt\n")
    assert error(path) == f"{path}:3:13: tls_server_config: key_file: {path.parent / 'server.crt'}: not a PEM private key"
    path = conf("tls_server_config:\n  cert_file: ''\n  key_file: server.key\n")
    assert error(path) == f"{path}:2:14: tls_server_config: cert_file: empty"
    path = conf("tls_server_config:\n  cert_file: server.crt\n  key_file: 12\n")
    assert error(path).startswith(f"{path}:3:13: tls_server_config: key_file: expected a string, got an integer")


def test_a_key_of_another_certificate_does_not_load(conf):
    path = conf("tls_server_config:\n  cert_file: server.crt\n  key_file: server2.key\n")
    text = error(path)
    assert text.startswith(f"{path}:3:13: tls_server_config: cert_file and key_file do not load together: ")
    assert "KEY_VALUES_MISMATCH" in text and "_ssl.c" not in text


def test_an_encrypted_key_is_refused_without_asking_for_its_pass_phrase(conf):
    path = conf("tls_server_config:\n  cert_file: server.crt\n  key_file: encrypted.key\n")
    assert error(path) == (f"{path}:3:13: tls_server_config: key_file: {path.parent / 'encrypted.key'}: "
                           "the key is encrypted; ktui needs it unencrypted (as the exporter toolkit does)")


def test_a_truncated_certificate_does_not_load(conf, tmp_path):
    text = (tmp_path / "server.crt").read_text()
    (tmp_path / "server.crt").write_text(text[:len(text) // 2])
    path = conf(TLS)
    assert error(path).startswith(f"{path}:3:13: tls_server_config: cert_file and key_file do not load together")


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize("option", ["--web-config", "--web.config.file"])
def test_a_bad_web_config_is_one_line_exit_1_before_anything_runs(conf, option):
    path = conf(TLS + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n")
    result = CliRunner().invoke(main, ["export", "-e", "vfs_read:c", option, str(path)])
    assert result.exit_code == 1
    assert result.output.splitlines() == [f"ktui: {path}:4:3: tls_server_config: cipher_suites: Go's cipher suite "
                                          "names are not supported: ktui uses OpenSSL's default ciphers (TLS 1.3's "
                                          "suites are fixed anyway); remove the key"]


def test_web_config_errors_are_ktui_errors():
    assert issubclass(WebConfigError, KtuiError)  # what the reload and the command line catch


# ---------------------------------------------------------------- the basic auth check


@pytest.fixture
def checks(monkeypatch):
    """Every bcrypt check made: (password, hash)."""
    made = []
    real = bcrypt.checkpw

    def spy(password, hashed):
        made.append((password, hashed))
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    return made


def test_a_passing_check_is_cached_a_failing_one_never(checks):
    auth = BasicAuth({b"alice": bcrypt_hash("right").encode()})
    assert auth.check(header("alice", "right")) and len(checks) == 1
    assert auth.check(header("alice", "right")) and len(checks) == 1  # from the cache
    for n in range(3):
        assert not auth.check(header("alice", "wrong"))
        assert len(checks) == 2 + n  # each wrong guess costs its bcrypt
    assert all(b"right" not in key and len(key) == 32 for key in auth._passed)  # an HMAC, no password kept


def test_an_unknown_user_costs_a_bcrypt_check_of_the_highest_cost(checks):
    auth = BasicAuth({b"alice": bcrypt_hash("a", rounds=4).encode(), b"bob": bcrypt_hash("b", rounds=5).encode()})
    assert not auth.check(header("mallory", "a"))
    assert len(checks) == 1 and checks[0][1].startswith(b"$2b$05$")  # the decoy, as slow as bob's check
    assert not auth.check(header("mallory", "a")) and len(checks) == 2  # never cached


def test_a_password_valid_for_another_user_does_not_pass(checks):
    auth = BasicAuth({b"alice": bcrypt_hash("a").encode(), b"bob": bcrypt_hash("b").encode()})
    assert auth.check(header("alice", "a"))
    assert not auth.check(header("bob", "a")) and not auth.check(header("alice", "b"))


def test_the_cache_is_bounded_least_recently_used_first(checks, monkeypatch):
    monkeypatch.setattr(web_config, "AUTH_CACHE_SIZE", 2)
    auth = BasicAuth({name.encode(): bcrypt_hash(name).encode() for name in ("a", "b", "c")})
    for name in ("a", "b", "a", "c"):  # c pushes out b, the least recently used
        assert auth.check(header(name, name))
    assert len(checks) == 3 and len(auth._passed) == 2
    assert auth.check(header("a", "a")) and len(checks) == 3
    assert auth.check(header("b", "b")) and len(checks) == 4


@pytest.mark.parametrize("value", [None, "", "Bearer abc", "Basic", "Basic !!!!", "Basic " + base64.b64encode(
    b"no-colon").decode(), "Digest username=alice", "Basic " + base64.b64encode(b"alice:a").decode()[:-2]])
def test_a_malformed_authorization_is_refused_without_a_bcrypt_check(checks, value):
    auth = BasicAuth({b"alice": bcrypt_hash("a").encode()})
    assert not auth.check(value) and checks == []


def test_credentials_parsing():
    assert basic_credentials(header("alice", "p:a:ss")) == (b"alice", b"p:a:ss")  # the first colon splits
    assert basic_credentials("basic " + base64.b64encode(b":").decode()) == (b"", b"")
    assert basic_credentials("Basic  " + base64.b64encode(b"u:p").decode() + " ") == (b"u", b"p")


def test_a_password_past_bcrypts_72_bytes_is_checked_as_go_does(checks):
    """bcrypt reads 72 bytes; Go's check (the toolkit's) truncates there,
    pyca's refuses longer passwords: ktui truncates, as Go."""
    long = "x" * 100
    auth = BasicAuth({b"alice": bcrypt.hashpw(long[:72].encode(), bcrypt.gensalt(4))})
    assert auth.check(header("alice", long)) and not auth.check(header("alice", "x" * 71))


# ---------------------------------------------------------------- the shipped examples

CONTRIB = Path(__file__).parents[2] / "contrib" / "export"


def test_the_contrib_web_config_is_refused_until_its_placeholder_is_replaced(pki, tmp_path):
    text = (CONTRIB / "web-config.yml").read_text()
    (tmp_path / "tls").mkdir()
    shutil.copy(pki.server[0], tmp_path / "tls" / "server.crt")
    shutil.copy(pki.server[1], tmp_path / "tls" / "server.key")
    path = tmp_path / "web-config.yml"
    path.write_text(text)
    line = text.splitlines().index("  prometheus: REPLACE-WITH-A-BCRYPT-HASH") + 1
    assert error(path).startswith(f"{path}:{line}:15: basic_auth_users: user 'prometheus': not a bcrypt hash")
    path.write_text(text.replace("REPLACE-WITH-A-BCRYPT-HASH", bcrypt_hash("pw")))
    web = load_web_config(path)
    assert web.summary == "TLS 1.2 to 1.3; basic auth for 1 user"
    assert web.authorized(header("prometheus", "pw"))


def test_the_contrib_prometheus_config_with_tls_and_basic_auth_is_valid(pki, tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus) is missing")
    password = tmp_path / "password"
    password.write_text("pw\n")
    text = (CONTRIB / "prometheus.yml").read_text()
    for key in ("scheme", "tls_config", "ca_file", "basic_auth", "username", "password_file"):
        text = text.replace(f"# {key}:", f"{key}:")
    text = text.replace("/etc/prometheus/ktui-ca.crt", str(pki.server[0]))
    text = text.replace("/etc/prometheus/ktui-password", str(password))
    assert "scheme: https" in text and "password_file: " + str(password) in text
    config = tmp_path / "prometheus.yml"
    config.write_text(text)
    result = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
