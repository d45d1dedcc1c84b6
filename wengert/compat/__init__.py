"""Other libraries' public module trees on wengert's engines, so their users' programs run
unchanged: ``wengert.compat.autograd`` (docs/coming-from-autograd.md)."""
