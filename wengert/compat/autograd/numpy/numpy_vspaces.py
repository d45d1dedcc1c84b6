"""``autograd.numpy.numpy_vspaces``: the vector spaces of arrays and containers."""
from ..core import ContainerVSpace, VSpace

ArrayVSpace = ComplexArrayVSpace = VSpace
ListVSpace = TupleVSpace = DictVSpace = ContainerVSpace
__all__ = ["ArrayVSpace", "ComplexArrayVSpace", "ListVSpace", "TupleVSpace", "DictVSpace"]
