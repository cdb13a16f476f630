"""NKIObject: the base of NKI's kernel-side classes (tensors, registers, configuration objects)."""


class NKIObject:
    """Base class for NKI kernel dataclasses and configuration objects.

    ``NKIObject(**kwargs)`` sets each keyword as an attribute.  Annotated fields a subclass does
    not give a value default to None, so configuration records (plain or ``@dataclass``) can be
    built from the keywords that apply.
    """

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for field in cls.__dict__.get("__annotations__", {}):
            if field not in cls.__dict__:
                setattr(cls, field, None)

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)
