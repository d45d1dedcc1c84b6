def to_dot(obj, *args):
    raise NotImplementedError
