"""tuttid's page per job and per process set, and their JSON, during a real job
(workers/slow_members.py through slow_job.py): rank 2 is the world's straggler, rank 0 that of
the set [0, 2]. The set pages, rendered by headless chromium, must name each set's members with
their state and its straggler in the "who is slow" table; /status.json?job=&set= carries the same.
The job id holds characters HTML and URLs give meaning to, so escaping is checked on the way.

Without chromium the browser test skips, and fails under CI=true (whose machine installs it,
scripts/setup.sh): a skip there would hide a missing install step."""
import html
import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest

from slow_job import SlowJob
from headless_browser import render
from tuttid_process import Tuttid

JOB = 'observe/<set pages> & "quotes"'
STEPS = 5


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def get_error(url):
    """The status and body of a request that must fail."""
    with pytest.raises(urllib.error.HTTPError) as error:
        get(url)
    return error.value.code, error.value.read().decode(), error.value.headers


def table(dom, css_class):
    """The rows of the table of `css_class`: (data-rank, [cell texts]) for each row that has one."""
    match = re.search(rf'<table class="{css_class}">(.*?)</table>', dom, re.S)
    assert match, f"no table {css_class} in {dom}"
    rows = []
    for rank, cells in re.findall(r'<tr data-rank="(\d+)">(.*?)</tr>', match.group(1), re.S):
        rows.append((int(rank), [html.unescape(re.sub(r"<[^>]+>", "", c))
                                 for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)]))
    return rows


@pytest.fixture(scope="module")
def running_job():
    """tuttid with the slow job's collectives done and its ranks alive; both end after the
    module's tests."""
    t = Tuttid(http=True)
    try:
        with SlowJob(t.endpoint, JOB, steps=STEPS, slow_seconds=0.2) as job:
            pair = job.wait_ready()
            yield t, pair
            job.finish()
    finally:
        t.stop()


def test_set_pages_name_members_and_stragglers_in_headless_chromium(running_job, tmp_path):
    t, pair = running_job
    # From the overview, by its links: the job id is escaped in them.
    overview = render(t.url + "/status", tmp_path)
    links = [html.unescape(h) for h in re.findall(r'href="(/job/[^"]+)"', overview)]
    quoted = urllib.parse.quote(JOB, safe="")
    assert f"/job/{quoted}" in links, links
    assert f"/job/{quoted}/set/0" in links and f"/job/{quoted}/set/{pair}" in links, links

    world = render(t.url + f"/job/{quoted}/set/0", tmp_path)
    assert "<set pages" not in world  # the job id is text, never markup
    assert "observe/&lt;set pages&gt; &amp;" in world
    members = table(world, "members")
    assert [rank for rank, _ in members] == [0, 1, 2]
    assert [cells[2] for _, cells in members] == ["alive"] * 3
    slow = table(world, "stragglers")
    assert slow, world
    rank, cells = slow[0]
    assert rank == 2, slow  # the member that slept before each world step
    assert int(cells[2]) >= STEPS - 1, slow
    assert re.search(r'<h2 id="who-is-slow">Who is slow</h2>', world)
    assert re.search(r'<tr data-kind="allreduce"><td>allreduce</td>', world)
    assert re.search(r'<tr data-kind="broadcast"><td>broadcast</td>', world)

    pair_page = render(t.url + f"/job/{quoted}/set/{pair}", tmp_path)
    members = table(pair_page, "members")
    assert [(rank, cells[2]) for rank, cells in members] == [(0, "alive"), (2, "alive")]
    slow = table(pair_page, "stragglers")
    assert slow and slow[0][0] == 0 and int(slow[0][1][2]) >= STEPS - 1, slow

    job_page = render(t.url + f"/job/{quoted}", tmp_path)
    assert "<set pages" not in job_page
    figures = re.search(r'<table class="set-figures">(.*?)</table>', job_page, re.S).group(1)
    assert '<tr data-set="0">' in figures and f'<tr data-set="{pair}">' in figures
    assert "rank 2 (" in figures and "rank 0 (" in figures


def test_status_json_carries_the_set_pages_figures(running_job):
    t, pair = running_job
    job = urllib.parse.quote(JOB, safe="")
    world = json.loads(get(t.url + f"/status.json?job={job}&set=0"))
    assert world["job"]["id"] == JOB and world["members"] == [0, 1, 2]
    assert [(m["rank"], m["state"]) for m in world["member_states"]] == \
        [(0, "alive"), (1, "alive"), (2, "alive")]
    stats = world["stats"]
    assert stats["by_kind"]["allreduce"]["negotiations"] >= STEPS + 4
    assert stats["by_kind"]["broadcast"]["negotiations"] == 1
    assert stats["negotiations"] == sum(k["negotiations"] for k in stats["by_kind"].values())
    assert stats["negotiation_seconds"]["count"] == stats["negotiations"]
    assert stats["fusion"]["tensors"] >= stats["negotiations"]
    stragglers = stats["stragglers"]
    top = stragglers["ranks"][0]
    assert top["rank"] == 2 and top["last"] >= STEPS - 1, stragglers
    # The lag is the sleep before each step, give or take the scheduler: at least most of it.
    assert top["lag_max_seconds"] >= 0.1, stragglers
    assert world["member_states"][2]["straggler"]["last"] == top["last"]

    # The job's entry, and the whole snapshot, carry the same set.
    entry = json.loads(get(t.url + f"/status.json?job={job}"))
    assert entry["id"] == JOB
    sets = {s["id"]: s for s in entry["process_sets"]}
    assert set(sets) == {0, pair}
    assert sets[0]["stats"]["stragglers"]["ranks"][0]["rank"] == 2
    assert sets[pair]["stats"]["stragglers"]["ranks"][0]["rank"] == 0
    snapshot = json.loads(get(t.url + "/status.json"))
    [listed] = [j for j in snapshot["jobs"] if j["id"] == JOB]
    assert {s["id"] for s in listed["process_sets"]} == {0, pair}
    assert all("stats" in s and "fast_path" in s for s in listed["process_sets"])


def test_unknown_jobs_and_sets_are_404_with_a_plain_text_reason(running_job):
    t, pair = running_job
    job = urllib.parse.quote(JOB, safe="")
    code, body, headers = get_error(t.url + "/job/%3Cno%20such%3E")
    assert code == 404 and body == "no job '<no such>' on this tuttid\n"
    assert headers["Content-Type"].startswith("text/plain") and \
        headers["X-Content-Type-Options"] == "nosniff"
    code, body, _ = get_error(t.url + f"/job/{job}/set/{pair + 100}")
    assert code == 404 and body == f"job '{JOB}' has no active process set {pair + 100}\n"
    code, body, _ = get_error(t.url + "/status.json?job=nope")
    assert code == 404 and "no job 'nope'" in body
    code, body, _ = get_error(t.url + f"/status.json?job={job}&set=world")
    assert code == 404 and "no active process set 'world'" in body
    # The page source itself, not only a browser's DOM, escapes the id.
    source = get(t.url + f"/job/{job}/set/0")
    assert "<set pages>" not in source and 'data-job="observe/&lt;set pages&gt; &amp; &quot;' \
        'quotes&quot;"' in source
