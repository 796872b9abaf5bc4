#!/usr/bin/env python3
"""Charts of a FunctionBench JSON (bench/src/functionbench) in the paper's
form: request latency per state per workload (log scale) and PSS per state
per workload, qrun's states beside runc's warm figures and gVisor's (its
checkpoint/restore as the nearest equivalent of hibernation). A runtime
that failed a workload is marked "failed" at the foot of its bar.

    functionbench-charts.py RESULT.json OUTDIR PREFIX

Writes OUTDIR/PREFIX-latency.png and OUTDIR/PREFIX-pss.png and prints
their file names; exits 1 (printing the reason) without matplotlib.
"""

import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:
    print(f"matplotlib is not installed: {e}", file=sys.stderr)
    sys.exit(1)


def median(doc, workload, runtime, metric):
    m = doc["workloads"][workload]["runtimes"].get(runtime, {}).get("metrics", {}).get(metric)
    return m["summary"]["median"] if m else None


def status(doc, workload, runtime):
    return doc["workloads"][workload]["runtimes"].get(runtime, {}).get("status")


def bars(doc, series, ylabel, title, path, log):
    workloads = [w for w in doc.get("order", doc["workloads"]) if any(
        median(doc, w, rt, m) is not None or status(doc, w, rt) == "FAILED"
        for _, rt, m in series)]
    if not workloads:
        return False
    fig, ax = plt.subplots(figsize=(max(10, 1.2 * len(workloads) + 3), 4.8))
    width = 0.8 / len(series)
    for i, (label, rt, metric) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(workloads))]
        ys = [median(doc, w, rt, metric) or 0 for w in workloads]
        ax.bar(xs, ys, width, label=label)
    if log:
        ax.set_yscale("log")
    bottom = ax.get_ylim()[0]
    for i, (label, rt, metric) in enumerate(series):
        for j, w in enumerate(workloads):
            if status(doc, w, rt) == "FAILED" and median(doc, w, rt, metric) is None:
                x = j + (i - (len(series) - 1) / 2) * width
                ax.text(x, bottom, " failed", rotation=90, ha="center", va="bottom",
                        fontsize=6, color="firebrick")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main():
    src, outdir, prefix = sys.argv[1:4]
    doc = json.load(open(src))
    latency = [
        ("runc cold", "runc", "cold_ms"),
        ("gVisor cold", "runsc", "cold_ms"),
        ("qrun cold", "qrun", "cold_ms"),
        ("runc warm", "runc", "warm_ms"),
        ("gVisor warm", "runsc", "warm_ms"),
        ("qrun warm", "qrun", "warm_ms"),
        ("gVisor restore + 1st request", "runsc", "restore_first_ms"),
        ("qrun 1st after hibernation (page faults)", "qrun", "pf_first_ms"),
        ("qrun 1st after hibernation (REAP)", "qrun", "reap_first_ms"),
        ("gVisor after restore", "runsc", "woken_warm_ms"),
        ("qrun woken", "qrun", "woken_warm_ms"),
    ]
    pss = [
        ("runc warm", "runc", "pss_warm_mib"),
        ("gVisor warm", "runsc", "pss_warm_mib"),
        ("qrun warm", "qrun", "pss_warm_mib"),
        ("gVisor restored", "runsc", "pss_woken_mib"),
        ("qrun hibernated", "qrun", "pss_hibernated_mib"),
        ("qrun woken (REAP)", "qrun", "pss_woken_mib"),
    ]
    out = []
    p = f"{prefix}-latency.png"
    if bars(doc, latency, "ms (log scale)", "Request latency per state", os.path.join(outdir, p), True):
        out.append(p)
    p = f"{prefix}-pss.png"
    if bars(doc, pss, "PSS per instance, MiB", "Memory (PSS) per state", os.path.join(outdir, p), False):
        out.append(p)
    print("\n".join(out))


main()
