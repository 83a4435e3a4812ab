"""What scripts/real-server.sh and real-vllm.sh print of their runs' report.json files."""
import json
import os


def reports(folder, names):
    """(name, report) of each run of `names` with a report.json in `folder`, in order: its heading
    and answer printed before, its warnings after what the caller prints of its stages."""
    for name in names:
        p = os.path.join(folder, name, "report.json")
        if not os.path.exists(p):
            continue
        r = json.load(open(p))
        print(f"== {name}: end {r.get('end_reason')}")
        a = r.get("answer") or {}
        if a:
            print(f"   answer {a.get('requests_per_s')} req/s [{a.get('low')}, {a.get('high')}] "
                  f"held {a.get('held')} not {a.get('not_held')} flood {a.get('flood_requests_per_s')}")
        yield name, r
        for w in r.get("warnings", []):
            print(f"   warning: {w}")


def outcome(s):
    """A stage's verdict, TTFT p50, mean concurrency and errors."""
    v = s.get("verdict") or {}
    return (f"verdict {v.get('outcome','-')}; ttft p50 {(s.get('ttft_ms') or {}).get('p50', 0):.0f} ms; "
            f"conc {(s.get('concurrency') or {}).get('mean', 0):.2f}; errors {s['requests'].get('errored')}")


def server(sv):
    """What the server's /metrics said of a stage (its `server` figures)."""
    g = lambda k: (sv.get(k) or {})
    return (f"running mean {g('running').get('mean', '-')} max {g('running').get('max', '-')}, "
            f"waiting mean {g('waiting').get('mean', '-')} max {g('waiting').get('max', '-')}, "
            f"gen tok/s {g('generation_tokens').get('per_s')}, requests/s {g('requests').get('per_s', '-')}")
