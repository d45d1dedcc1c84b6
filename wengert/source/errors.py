"""The one error of source mode: a construct it does not differentiate, named, with its line."""

__all__ = ["SourceError"]


class SourceError(NotImplementedError):
    """A construct the source transformer does not handle, with its file and line."""

    def __init__(self, what, lineno=None, filename=None, hint=""):
        self.what, self.lineno, self.filename = what, lineno, filename
        where = ""
        if lineno is not None:
            where = f" at line {lineno}" + (f" of {filename}" if filename else "")
        msg = f"wengert.source cannot differentiate {what}{where}"
        if hint:
            msg += f": {hint}"
        super().__init__(msg)
