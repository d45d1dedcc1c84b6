"""Run GradBench's evals against wengert (eager and compiled) and the other tools installed here.

    python benchmarks/gradbench/run.py --gradbench PATH [--evals lse llsq ...]
        [--tools wengert wengert-compile jax pytorch manual] [--args lse="-n 1000 10000"]

PATH is a local clone of https://github.com/gradbench/gradbench with its ``manual`` tool
built (``make -C tools/manual NATIVE=no`` after putting nlohmann's json.hpp in ``cpp/``);
nothing is fetched.  Each eval is GradBench's own Python program, run from PATH; this script
is the intermediary that GradBench's Rust CLI otherwise is: it passes each message from the
eval to the tool and each response back, and records both.  The eval validates every
answer against the ``manual`` C++ tool (or a closed form) and says so in an ``analysis``
message; this script prints one table per eval from those messages.
"""
import argparse
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

EVALS = ("hello", "lse", "llsq", "det", "ode", "kmeans", "gmm", "lstm", "ba", "ht",
         "particle", "saddle")
PRIMAL = {"hello": "square", "lse": "primal", "llsq": "primal", "det": "primal",
          "ode": "primal", "kmeans": "cost", "gmm": "objective", "lstm": "objective",
          "ba": "objective", "ht": "objective"}
# workloads that finish on a 2-core machine in minutes (see README.md); GradBench's defaults otherwise
QUICK = "--min-runs 2 --min-seconds 0.3 "   # a warm run after the first, and no long repeats
SMALL = {"hello": "", "particle": "", "saddle": "",
         "lse": QUICK + "-n 2500 20000 160000 1280000", "llsq": QUICK + "-n 128 1024 16392",
         "det": QUICK + "-l 5 7 9 11", "kmeans": QUICK + "-k 10 100 1000 -n 1000 -d 8",
         "ode": QUICK + "-n 1000 10000 -s 1 10", "gmm": QUICK + "-d 2 10 20 -k 5 25",
         "lstm": QUICK + "-l 2 -c 1024", "ba": QUICK + "--min 1 --max 2",
         "ht": QUICK + "--min 1 --max 2"}


def tool_command(name, gradbench, python, jacobian):
    tool = os.path.join(HERE, "tool.py")
    if name == "wengert":
        return [python, tool, "--jacobian", jacobian], ROOT
    if name == "wengert-compile":
        return [python, tool, "--compile", "--jacobian", jacobian], ROOT
    if name == "manual":
        return [python, "python/gradbench/gradbench/cpp.py", "manual"], gradbench
    if name == "jax":   # the stock tool, timed until JAX's asynchronous result exists
        return [python, os.path.join(HERE, "jax_blocking.py")], gradbench
    if name == "jax-stock":
        return [python, "python/gradbench/gradbench/tools/jax/run.py"], gradbench
    return [python, f"python/gradbench/gradbench/tools/{name}/run.py"], gradbench


def available(name, gradbench, python, evalname):
    """Whether ``name`` can run ``evalname`` here (installed, and listed by the tool)."""
    if name.startswith("wengert"):
        return True
    listed = os.path.join(gradbench, "tools", name.removesuffix("-stock"), "evals.txt")
    if not os.path.exists(listed):
        return False
    with open(listed) as f:
        names = {line.split()[0] for line in f if line.strip()}
    if evalname not in names:
        return False
    module = {"jax": "jax", "jax-stock": "jax", "pytorch": "torch"}.get(name)
    if module is None:
        return True
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def _reader(stream, q):
    for line in stream:
        q.put(line)
    q.put(None)


def session(eval_cmd, tool_cmd, gradbench, tool_cwd, timeout):
    """Run one eval against one tool; return [(message, response, elapsed_s)]."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(gradbench, "python", "gradbench"), env.get("PYTHONPATH", "")])
    tool_env = dict(env)
    tool_env["PYTHONPATH"] = os.pathsep.join([ROOT, tool_env["PYTHONPATH"]])
    ev = subprocess.Popen(eval_cmd, cwd=gradbench, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    tl = subprocess.Popen(tool_cmd, cwd=tool_cwd, env=tool_env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    eq, tq = queue.Queue(), queue.Queue()
    threading.Thread(target=_reader, args=(ev.stdout, eq), daemon=True).start()
    threading.Thread(target=_reader, args=(tl.stdout, tq), daemon=True).start()
    log, deadline, note = [], time.monotonic() + timeout, None
    try:
        while True:
            line = eq.get(timeout=max(deadline - time.monotonic(), 0.01))
            if line is None:
                break
            message = json.loads(line)
            start = time.monotonic()
            tl.stdin.write(line if line.endswith("\n") else line + "\n")
            tl.stdin.flush()
            if message.get("kind") == "end":
                break
            reply = tq.get(timeout=max(deadline - time.monotonic(), 0.01))
            if reply is None:
                note = "tool exited"
                log.append((message, None, time.monotonic() - start))
                break
            log.append((message, json.loads(reply), time.monotonic() - start))
            ev.stdin.write(reply)
            ev.stdin.flush()
    except queue.Empty:
        note = f"timed out after {timeout:.0f} s"
        if log and log[-1][1] is not None or not log:
            log.append(({"kind": "evaluate", "function": "?", "description": "?"}, None, 0))
    except BrokenPipeError:
        note = "pipe closed"
    finally:
        for p in (tl, ev):
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in (tl, ev):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
    return log, note


def rows(log):
    """One row per evaluate message: function, description, timings, validity."""
    out, by_id = [], {}
    for message, response, wall in log:
        if message.get("kind") == "evaluate":
            row = {"function": message["function"], "description": message.get("description", ""),
                   "success": bool(response and response.get("success")),
                   "error": (response or {}).get("error"), "valid": None, "wall": wall}
            if response and response.get("timings"):
                ns = [t["nanoseconds"] for t in response["timings"] if t["name"] == "evaluate"]
                row["min"], row["first"], row["runs"] = min(ns) / 1e9, ns[0] / 1e9, len(ns)
            by_id[message.get("id")] = row
            out.append(row)
        elif message.get("kind") == "analysis" and message.get("of") in by_id:
            by_id[message["of"]]["valid"] = message["valid"]
            by_id[message["of"]]["analysis_error"] = message.get("error")
    return out


def fmt_time(s):
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def table(evalname, results):
    """Markdown table: one row per (tool, workload, derivative function)."""
    primal = PRIMAL.get(evalname)
    lines = [f"### {evalname}", "",
             "| tool | workload | function | derivative (best) | first call | ÷ primal | valid |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for tool, (log, note) in results.items():
        rs = rows(log)
        primals = {r["description"]: r.get("min") for r in rs if r["function"] == primal}
        for r in rs:
            if r["function"] == primal and evalname != "hello":
                continue
            p = primals.get(r["description"])
            ratio = f"{r['min'] / p:.2f}" if r.get("min") and p and evalname != "hello" else "—"
            if r["valid"] is True:
                mark = "✓"
            elif r["valid"] is False:
                mark = "✗ (wrong answer)"
            elif not r["success"]:
                mark = "✗ (" + ((r["error"] or note or "no answer").strip().splitlines() or ["?"])[-1][:60] + ")"
            else:
                mark = "?"
            lines.append(f"| {tool} | {r['description']} | {r['function']} | {fmt_time(r.get('min'))} "
                         f"| {fmt_time(r.get('first'))} | {ratio} | {mark} |")
        primal_bad = [r for r in rs if r["function"] == primal and r["valid"] is False]
        if primal_bad:
            lines.append(f"| {tool} | {len(primal_bad)} primal evaluation(s) invalid | | | | | ✗ |")
        if note:
            lines.append(f"| {tool} | ({note}) | | | | | |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gradbench", required=True, help="path of a local GradBench clone")
    p.add_argument("--evals", nargs="+", default=list(EVALS), choices=EVALS)
    p.add_argument("--tools", nargs="+",
                   default=["wengert", "wengert-compile", "manual", "jax", "pytorch"])
    p.add_argument("--args", nargs="*", default=[], metavar="EVAL=ARGS",
                   help="arguments for an eval's own CLI, e.g. lse='-n 1000 10000'")
    p.add_argument("--defaults", action="store_true",
                   help="GradBench's default workloads instead of the small set that finishes here")
    p.add_argument("--jacobian", choices=("sparse", "blocks"), default="sparse",
                   help="passed to tool.py: how ba and ht build their Jacobians")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--timeout", type=float, default=1800, help="seconds per eval and tool")
    p.add_argument("--log", help="folder for the raw message logs (JSON lines)")
    args = p.parse_args(argv)
    gradbench = os.path.abspath(args.gradbench)
    extra = {} if args.defaults else dict(SMALL)
    for item in args.args:
        name, _, value = item.partition("=")
        extra[name] = value
    for evalname in args.evals:
        eval_cmd = [args.python, f"python/gradbench/gradbench/evals/{evalname}/run.py",
                    *shlex.split(extra.get(evalname, ""))]
        results = {}
        for tool in args.tools:
            if not available(tool, gradbench, args.python, evalname):
                continue
            cmd, cwd = tool_command(tool, gradbench, args.python, args.jacobian)
            print(f"# {evalname} × {tool}: {shlex.join(eval_cmd[1:])}", file=sys.stderr, flush=True)
            results[tool] = session(eval_cmd, cmd, gradbench, cwd, args.timeout)
            if args.log:
                os.makedirs(args.log, exist_ok=True)
                with open(os.path.join(args.log, f"{evalname}-{tool}.jsonl"), "w") as f:
                    for message, response, wall in results[tool][0]:
                        # the inputs are the eval's to regenerate; the log keeps the rest
                        message = {k: v for k, v in message.items() if k != "input"}
                        f.write(json.dumps({"message": message, "response": response,
                                            "wall_s": wall}) + "\n")
        print(table(evalname, results), "\n", flush=True)


if __name__ == "__main__":
    main()
