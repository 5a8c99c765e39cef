"""The Grafana dashboard (packaging/grafana/tutti-dashboard.json) against a real tuttid: every
PromQL expression in it (panel targets, templating queries) may only name series that tuttid's
/metrics exports while a job runs (so that the per-set series exist). A histogram's family
counts with its _bucket, _sum and _count series. A renamed or misspelt series fails here rather
than as an empty panel."""
import json
import os
import re
import urllib.request

from slow_job import SlowJob
from tuttid_process import ROOT, Tuttid

DASHBOARD = os.path.join(ROOT, "packaging", "grafana", "tutti-dashboard.json")

# PromQL words that are neither series nor functions (functions are followed by "(").
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "offset", "inf", "nan", "atan2"}


def expressions(dashboard):
    """(where, PromQL) for every query of the dashboard: panel targets (rows' nested panels
    too) and the templating variables of type query. label_values(selector, label) gives its
    selector, whose label is no series."""
    found = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                found.append((f"panel '{panel.get('title')}' {target.get('refId')}",
                              target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
        if match:
            query = match.group(1)
        found.append((f"variable '{variable.get('name')}'", query))
    return found


def series_names(expr):
    """The series an expression names: what is left once Grafana's variables, strings, label
    matchers, ranges, grouping clauses, function calls and numbers are taken out."""
    text = re.sub(r"\$\{[^}]*\}|\$\w+", "x", expr)            # $job, ${job:regex}, $__rate_interval
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', text)  # label values
    text = re.sub(r"\{[^}]*\}", " ", text)                      # matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)                      # ranges, subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def exported(metrics_text):
    """Every series name /metrics exports: its samples, and each family of a # TYPE line with
    the suffixes its type gives (histogram: _bucket, _sum, _count; summary: _sum, _count)."""
    names = set()
    for line in metrics_text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            suffixes = {"histogram": ("_bucket", "_sum", "_count"),
                        "summary": ("_sum", "_count")}.get(kind, ())
            names.update(name + s for s in suffixes)
        elif line and not line.startswith("#"):
            names.add(re.match(r"[\w:]+", line).group(0))
    return names


def unexported(dashboard, names):
    """(where, series) for every series a query names that is not in `names`."""
    return sorted((where, series) for where, expr in expressions(dashboard)
                  for series in series_names(expr) if series not in names)


def load():
    with open(DASHBOARD) as f:
        return json.load(f)


def test_series_names_are_read_out_of_promql():
    assert series_names('sum by (job, set) (rate(tutti_set_negotiations_total{job=~"$job", '
                        'set=~"$set"}[$__rate_interval]))') == {"tutti_set_negotiations_total"}
    assert series_names("histogram_quantile(0.99, sum by (le) (rate(tutti_negotiation_seconds_"
                        "bucket[5m] offset 1h))) > bool 1e-3") == \
        {"tutti_negotiation_seconds_bucket"}
    assert series_names('a_total / on (job) group_left (kind) b{x="c_total"} or vector(0)') == \
        {"a_total", "b"}
    assert series_names("tutti_jobs") == {"tutti_jobs"}


def test_the_check_fails_on_a_series_tuttid_does_not_export():
    made_up = {"title": "made up", "targets": [{"refId": "A",
                                                "expr": "rate(tutti_no_such_total[5m])"}]}
    dashboard = {"panels": [{"title": "t", "type": "row", "panels": [made_up]}],
        "templating": {"list": [{"name": "v", "type": "query",
                                 "query": {"query": "label_values(tutti_nor_this, job)"}},
                                {"name": "u", "type": "textbox", "query": "http://x"}]}}
    names = {"tutti_jobs"}
    assert unexported(dashboard, names) == [("panel 'made up' A", "tutti_no_such_total"),
                                            ("variable 'v'", "tutti_nor_this")]


def test_dashboard_is_templated_by_job_and_set():
    dashboard = load()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["job"]["type"] == "query" and variables["set"]["type"] == "query"
    assert "$job" in variables["set"]["query"]["query"]
    per_set = [(where, expr) for where, expr in expressions(dashboard)
               if any(s.startswith("tutti_set_") for s in series_names(expr))
               and where.startswith("panel")]
    assert per_set
    for where, expr in per_set:
        if '"_other"' in expr:
            continue  # the panel of the sets beyond the cap names their shared label
        assert "$job" in expr and "$set" in expr, where


def test_every_dashboard_query_names_a_series_tuttid_exports():
    dashboard = load()
    queries = expressions(dashboard)
    assert len(queries) >= 20, queries  # the extraction found the dashboard's queries
    t = Tuttid(http=True)
    try:
        with SlowJob(t.endpoint, "dashboard-job", steps=2, slow_seconds=0.05) as job:
            job.wait_ready()
            with urllib.request.urlopen(t.url + "/metrics", timeout=30) as response:
                metrics = response.read().decode()
            job.finish()
    finally:
        t.stop()
    names = exported(metrics)
    # The job made the per-set series: the check below would not see a per-set name otherwise.
    assert 'tutti_set_straggler_seconds_bucket{job="dashboard-job",set="0"' in metrics
    assert unexported(dashboard, names) == []
