"""Credentials on tuttid's HTTP endpoints (docs/security.md, "The status endpoints"): with a bearer
token and basic credentials in the config file, /status, /status.json, /metrics and the job pages
answer 401 with a Basic challenge to a request without them or with wrong ones, and 200 to either
kind of right ones; /healthz stays open; a real browser logs in with the basic credentials. Also
the refusals of a half-given configuration and the warning for a non-loopback address without
credentials."""
import base64
import urllib.parse
import subprocess
import urllib.error
import urllib.request

from headless_browser import browser, render
from tuttid_process import TUTTID

TOKEN = "s3cret-token-for-the-test"
USER, PASSWORD = "operator", "pass:word with spaces"


def fetch(url, authorization=None):
    """(status, WWW-Authenticate header, body) of a GET."""
    request = urllib.request.Request(url)
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("WWW-Authenticate"), response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("WWW-Authenticate"), e.read().decode()


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def config(tmp_path):
    path = tmp_path / "tuttid.toml"
    path.write_text(f'http-token = "{TOKEN}"\nhttp-user = "{USER}"\n'
                    f'http-password = "{PASSWORD}"\n')
    path.chmod(0o600)
    return str(path)


def test_protected_endpoints_need_the_token_or_the_basic_credentials(tmp_path, tuttid_factory):
    t = tuttid_factory("--config", config(tmp_path), http=True)
    refusal = "authentication required: send tuttid's bearer token or basic credentials\n"
    for path in ("/status", "/status.json", "/metrics", "/", "/job/some-job",
                 "/status.json?job=x"):
        for wrong in (None, "Bearer nope", "Bearer " + TOKEN + "x", basic(USER, "nope"),
                      basic("someone", PASSWORD), TOKEN):
            assert fetch(t.url + path, wrong) == (
                401, 'Basic realm="tuttid", charset="UTF-8"', refusal), (path, wrong)
    for right in ("Bearer " + TOKEN, basic(USER, PASSWORD)):
        status, _, body = fetch(t.url + "/status.json", right)
        assert status == 200 and body.startswith("{"), body
        status, _, body = fetch(t.url + "/metrics", right)
        assert status == 200 and "tutti_negotiations_total" in body
        # Past the credentials, the page's own answer: an unknown job is a 404.
        assert fetch(t.url + "/job/no-such-job", right)[0] == 404
    assert fetch(t.url + "/healthz") == (200, None, "ok\n")


def test_a_browser_logs_in_with_the_basic_credentials(tmp_path, tuttid_factory):
    browser()
    t = tuttid_factory("--config", config(tmp_path), http=True)
    host = t.url[len("http://"):]
    user, password = urllib.parse.quote(USER), urllib.parse.quote(PASSWORD)
    page = render(f"http://{user}:{password}@{host}/status", tmp_path)
    assert "<title>tuttid" in page, page[:2000]
    # Without them the browser gets the challenge (headless, nobody answers it): no page.
    refused = render(t.url + "/status", tmp_path / "anonymous")
    assert "<title>tuttid" not in refused and "jobs" not in refused, refused[:2000]


def test_half_given_credentials_are_refused_and_open_addresses_warned(tmp_path, tuttid_factory):
    result = subprocess.run([TUTTID, "--bind", "tcp://127.0.0.1:*", "--http", "127.0.0.1:0",
                             "--http-user", "someone"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "--http-user needs --http-password" in result.stderr
    t = tuttid_factory("--http", "0.0.0.0:0")
    assert "the status page and metrics on 0.0.0.0:0 need no credentials: anyone who reaches " \
           "that address reads job names, ranks and counters (set http-token, or http-user and " \
           "http-password, in the config file)" in t.stderr()
