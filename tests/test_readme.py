"""The README's example runs and says what it claims."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_and_comments_hold():
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns = {}
    exec(compile(block, str(README), "exec"), ns)  # our own README, not user input
    import numpy as np
    import wengert as wg
    assert wg.grad(ns["f"], argnums=(0, 1))(0.5, 4.2) == (5.077582561890373, 0.5)
    assert ns["z"].value == 2.579425538604203
    assert ns["z"].grad().wrt(ns["x"], ns["y"]) == (5.077582561890373, 0.5)
    assert wg.hessian(ns["loss"])(np.zeros(3), ns["X"], ns["target"]).shape == (3, 3)


def test_readme_set_up_commands_match_ci():
    text = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = 'pip install -e ".[test]" && python -m pytest -n auto'
    assert test_cmd in text and ci.rstrip().splitlines()[-1] == test_cmd
    assert 'pip install -e . && wengert diff "x*y + sin(x)" --at x=0.5 y=4.2' in text
