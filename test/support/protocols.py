"""What a declared Protocol asks of an object, for conformance tests."""
from __future__ import annotations

import inspect
from typing import Any, Protocol


def protocol_members(proto: type) -> tuple[set[str], set[str]]:
    """(attributes and properties, methods) that ``proto`` and the Protocols it extends
    declare (public names only)."""
    attributes: set[str] = set()
    methods: set[str] = set()
    for cls in proto.__mro__:
        if cls in (Protocol, object) or not getattr(cls, '_is_protocol', False):
            continue
        attributes |= set(vars(cls).get('__annotations__', {}))
        for name, v in vars(cls).items():
            if name.startswith('_'):
                continue
            if isinstance(v, property):
                attributes.add(name)
            elif inspect.isfunction(v):
                methods.add(name)
    return attributes, methods


def missing_members(obj: Any, proto: type) -> list[str]:
    """The members ``proto`` declares that ``obj`` lacks, or has of the other kind (a
    method where an attribute is declared, or the reverse)."""
    attributes, methods = protocol_members(proto)
    assert attributes | methods, f'{proto.__name__} declares nothing'
    out = [f'{name} (attribute)' for name in sorted(attributes)
           if not hasattr(obj, name) or callable(getattr(obj, name))]
    return out + [f'{name} (method)' for name in sorted(methods)
                  if not callable(getattr(obj, name, None))]
