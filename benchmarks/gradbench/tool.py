"""wengert as a GradBench tool: GradBench's JSON-lines protocol on stdin/stdout.

Run from the repository root:

    python benchmarks/gradbench/tool.py             # eager wengert
    python benchmarks/gradbench/tool.py --compile   # the same programs under wg.compile

Each eval is a module in ``evals/`` whose ``functions(options)`` maps GradBench's function
names to ``(prepare, run, post)``: ``prepare`` turns the eval's JSON input into arguments
(outside the clock, as GradBench's other Python tools do), ``run`` is the timed work and
``post`` turns its result back into JSON.  ``run`` is repeated at least ``min_runs`` times
and for at least ``min_seconds``; each call is one ``"evaluate"`` timing, the first one
included (for ``--compile`` it holds the trace and compile).
"""
import argparse
import importlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# this checkout's wengert and the eval modules beside this file, whatever the cwd
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

EVALS = ("hello", "gmm", "ba", "lstm", "ht", "kmeans", "llsq", "lse", "det", "ode",
         "particle", "saddle")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compile", action="store_true",
                   help="run each function under wg.compile (traced once per signature)")
    p.add_argument("--jacobian", choices=("sparse", "blocks"), default="sparse",
                   help="ba and ht: wg.sparse_jacobian over the whole pattern (sparse), or "
                        "per-block derivatives assembled by hand (blocks: ba by vmap of "
                        "jacobian, ht by jacobian plus two jvps)")
    p.add_argument("--multithreaded", action="store_true",
                   help="do not pin the process to one CPU (GradBench's tools pin by default)")
    return p.parse_args(argv)


class Tool:
    def __init__(self, options):
        self.options = options
        self.modules = {}

    def define(self, name):
        if name not in EVALS:
            return {"success": False, "error": f"wengert has no implementation of {name!r}"}
        try:
            start = time.perf_counter_ns()
            module = importlib.import_module(f"evals.{name}")
            self.modules[name] = module.functions(self.options)
            timing = {"name": "define", "nanoseconds": time.perf_counter_ns() - start}
        except Exception as e:
            return {"success": False, "error": "".join(traceback.format_exception(e))}
        return {"success": True, "timings": [timing]}

    def evaluate(self, name, function, raw):
        try:
            prepare, run, post = self.modules[name][function]
            args = prepare(raw)
            min_runs = raw.get("min_runs", 1) if isinstance(raw, dict) else 1
            min_seconds = raw.get("min_seconds", 0) if isinstance(raw, dict) else 0
            timings, elapsed = [], 0
            while len(timings) < min_runs or elapsed < min_seconds * 1e9:
                start = time.perf_counter_ns()
                out = run(*args)
                ns = time.perf_counter_ns() - start
                timings.append({"name": "evaluate", "nanoseconds": ns})
                elapsed += ns
            return {"success": True, "output": post(out), "timings": timings}
        except Exception as e:
            return {"success": False, "error": "".join(traceback.format_exception(e))}

    def respond(self, message):
        response = {"id": message["id"]}
        kind = message.get("kind")
        if kind == "start":
            response["tool"] = "wengert"
            response["config"] = {"compile": self.options.compile,
                                  "jacobian": self.options.jacobian}
        elif kind == "define":
            response |= self.define(message["module"])
        elif kind == "evaluate":
            response |= self.evaluate(message["module"], message["function"],
                                      message["input"])
        return response


def main(argv=None):
    options = parse_args(argv)
    if not options.multithreaded and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
        except OSError:
            pass
    tool = Tool(options)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(tool.respond(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
