def compile(f):
    raise NotImplementedError
