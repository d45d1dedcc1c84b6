"""Checkpointing: trade recomputation for memory in reverse mode (see :mod:`.scan`)."""
from .scan import (STRATEGIES, Action, Schedule, checkpoint, checkpoint_schedule, iter_schedule,
                   revolve_cost, scan, while_loop)

__all__ = ["checkpoint", "scan", "while_loop", "checkpoint_schedule", "iter_schedule", "Action",
           "Schedule", "revolve_cost", "STRATEGIES"]
