"""Response models from the packages' frozen dataclasses: a route hands the domain's
object to its pydantic model, which reads the attributes it declares (nested dataclasses
too), so no dict stands between the two."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["model_of"]

M = TypeVar("M", bound=BaseModel)


def model_of(model: type[M], obj: object, /, **extra: Any) -> M:
    """``model`` from ``obj``'s attributes; ``extra`` gives the fields the domain type does
    not carry (a detail's parts read separately, an id spelled for the API)."""
    if not extra:
        return model.model_validate(obj, from_attributes=True)
    given = {name: getattr(obj, name) for name in model.model_fields
             if name not in extra and hasattr(obj, name)}
    return model.model_validate({**given, **extra}, from_attributes=True)
