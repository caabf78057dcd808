"""Pad's constant value written as text (``--constant-value``), turned into a typed element.

The kernel (:func:`padconv_cli.kernels.pad.coerce_constant_value`) takes typed values
only; this module reads the text a user typed, by the element kind of the data
(:func:`padconv_cli.dtypes.element_kind`), and hands the number to the kernel's coercion,
which applies the type's range.  Used where the caller's attributes are resolved against the
data (:func:`padconv_cli.models.resolve_call`, the out-of-core path of the pipeline).

Text rules:

* int: a decimal integer, or a decimal number with an integral value (``1e3``, ``2.0``),
  read exactly (no float rounding);
* float: any decimal number, ``nan``, ``inf``/``infinity`` with a sign; a number too large
  for float64 (``1e999``) is an overflow, not infinity; complex text is refused;
* complex: Python's complex syntax (``1+2j``, spaces allowed);
* bool: ``true``/``false``/``1``/``0`` in any case;
* numbers and booleans are ASCII text without ``_`` (Python would read ``1_5`` as 15 and
  Arabic-Indic digits as decimals: text nobody means as a number is refused);
* string: the text itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from padconv_cli.kernels.pad import (
    coerce_constant_value,
    float_range,
    not_a,
    pad_element_kind,
    refusal,
)


def constant_from_text(text: str, dtype: Any) -> Any:
    """The element of ``dtype`` that ``text`` writes (module docstring), or
    :class:`AttributeValueError` naming constant_value and the rule."""
    dt = np.dtype(dtype)
    kind = pad_element_kind(dt)
    if kind == "string":
        return coerce_constant_value(text, dt)
    if not text.isascii() or "_" in text:
        raise not_a(text, dt, "plain ASCII number text",
                     "ASCII digits, without '_' separators")
    value = _PARSERS[kind](text, dt)
    return coerce_constant_value(value, dt, shown=text.strip())


def typed_attributes(attributes: Mapping[str, Any], dtype: Any) -> dict[str, Any]:
    """``attributes`` with a text ``constant_value`` turned into an element of ``dtype``."""
    typed = dict(attributes)
    if isinstance(typed.get("constant_value"), str):
        typed["constant_value"] = constant_from_text(typed["constant_value"], dtype)
    return typed


_BOOL_TEXT = {"true": True, "false": False, "1": True, "0": False}


def _bool_text(text: str, dt: np.dtype) -> bool:
    word = text.strip().lower()
    if word not in _BOOL_TEXT:
        raise not_a(text, dt, "a boolean", "true, false, 0 or 1")
    return _BOOL_TEXT[word]


def _integral_text(text: str, dt: np.dtype) -> int:
    from decimal import Decimal, InvalidOperation  # exact, also for "1e3" or "2.0"

    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        raise not_a(text, dt, "an integer", "an integer") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise not_a(text, dt, "an integer", "an integer")
    return int(number)


def _real_text(text: str, dt: np.dtype) -> float:
    stripped = text.strip()
    try:
        number = float(stripped)
    except ValueError:
        try:
            complex(stripped.replace(" ", ""))
        except ValueError:
            raise not_a(text, dt, "a number", "a real number") from None
        raise refusal(f"constant_value {stripped} is complex; a {dt} tensor needs a real "
                       "number") from None
    names_infinity = stripped.lstrip("+-").lower() in ("inf", "infinity")  # not "1e999"
    if math.isinf(number) and not names_infinity:
        raise refusal(f"constant_value {stripped} does not fit {dt} {float_range(dt)}")
    return number


def _complex_text(text: str, dt: np.dtype) -> complex:
    try:
        return complex(text.strip().replace(" ", ""))
    except ValueError:
        raise not_a(text, dt, "a number", "a (complex) number") from None


_PARSERS: dict[str, Callable[[str, np.dtype], Any]] = {
    "bool": _bool_text,
    "int": _integral_text,
    "float": _real_text,
    "complex": _complex_text,
}
