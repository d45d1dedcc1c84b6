"""The seed tutorials' worked examples, shared by the test modules."""
import wengert.numpy as wnp


def seed_z(x, y):
    """Seed 001's expression: z = x·y + sin(x)."""
    return x * y + wnp.sin(x)


def babylonian(x, n=10):
    """Seed 003's Babylonian square root, n iterations."""
    t = (1 + x) / 2
    for _ in range(n):
        t = (t + x / t) / 2
    return t
