"""Run every benchmark in one go: ``python benchmarks/run.py [--quick]``.

Each prints its own table of medians and ratios (against plain NumPy and against
autograd, PyTorch and JAX when they are installed: ``pip install -e .[bench]``).
"""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def main():
    args = sys.argv[1:]
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n##### {script.name} #####", flush=True)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        rc = subprocess.call([sys.executable, str(script), *args], cwd=HERE, env=env)
        if rc:
            failed.append(script.name)
    if failed:
        print("failed:", ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
