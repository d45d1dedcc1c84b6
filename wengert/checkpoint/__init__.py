"""Checkpointing: trade recomputation for memory in reverse mode.

* ``checkpoint(f)``: ``f``'s intermediates are not kept on the tape; ``f`` is run
  again, on a fresh sub-tape, when the reverse sweep reaches it.
* ``scan(step, init, xs)``: a loop ``carry, y = step(carry, x)`` recorded as ONE
  tape node.  Its pullback executes a *schedule*: which loop states to store
  during the forward sweep, which to rebuild later ("all", "ctz", "binomial",
  "online", "invert").  ``while_loop(cond, body, init)``: the same for a loop
  whose length is found by running it.
* ``checkpoint_schedule(length, strategy)``: that schedule, as a list of
  ``Action``s, for inspection, tests and drawings.

The modules: ``schedules`` (the schedules, plain data), ``regions``
(``checkpoint(f)`` and the sub-tape machinery), ``scan`` (``scan``, ``while_loop``,
executing a schedule); the primitives they record are in
:mod:`wengert.rules.checkpointing`.
"""
from .regions import checkpoint
from .scan import scan, while_loop
from .schedules import (STRATEGIES, Action, Schedule, checkpoint_schedule, iter_schedule,
                        revolve_cost)

__all__ = ["checkpoint", "scan", "while_loop", "checkpoint_schedule", "iter_schedule", "Action",
           "Schedule", "revolve_cost", "STRATEGIES"]
