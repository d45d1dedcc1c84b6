"""kmeans: the k-means cost and the Newton direction J·H⁻¹ (H is diagonal).

The gradient and the Hessian's diagonal come from one forward-over-reverse pass: the
tangent of the gradient along a vector of ones is H·1, which is H's diagonal since every
centroid's coordinates are independent.
"""
import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_float, to_list


def cost(centroids, points):
    # squared distances |p - c|² for every pair, as |p|² − 2 p·c + |c|²
    d2 = (wnp.sum(points * points, axis=1)[:, None] - 2 * points @ centroids.T
          + wnp.sum(centroids * centroids, axis=1)[None, :])
    return wnp.sum(wnp.min(d2, axis=1))


def direction(centroids, points):
    grad = wg.grad(cost)
    g, h = wg.jvp(lambda c: grad(c, points), (centroids,), (wnp.ones_like(centroids),))
    return g / h


def functions(options):
    prep = lambda raw: (array(raw["centroids"]), array(raw["points"]))
    return {"cost": (prep, maybe_compile(options, cost), to_float),
            "dir": (prep, maybe_compile(options, direction), to_list)}
