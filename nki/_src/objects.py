"""NKIObject: the base of NKI's kernel-side classes (tensors, registers, configuration objects)."""


class _KeywordFields(type):
    """``@dataclass`` gives an NKIObject subclass an ``__init__`` taking only its annotated
    fields; keywords naming its other class attributes (plain ``name = None`` lines, which
    dataclass skips; nki-library's ``SectionParams``) are set on the new object as well."""

    def __call__(cls, *args, **kwargs):
        fields = getattr(cls, "__dataclass_fields__", None)
        if fields is None:
            return super().__call__(*args, **kwargs)
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in fields and hasattr(cls, k)}
        obj = super().__call__(*args, **kwargs)
        for key, value in extra.items():
            setattr(obj, key, value)
        return obj


class NKIObject(metaclass=_KeywordFields):
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

    def __init__(self, **kwargs: object) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)
