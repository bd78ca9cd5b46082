"""A case's id: the one place that formats it and takes it apart.

    resnet50/conv2d/3x3-64/bwd_data/f16/nhwc/r0
    suite   /op    /config/direction/dtype/layout/range

Suite and config names cannot contain "/" (the catalogue's name pattern), so
the seven parts always parse back.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

SEPARATOR = "/"


@dataclass(frozen=True, order=True)
class CaseIdParts:
    """The seven parts of a case id, as given: the one declaration of the parts, their names and order.

    Unchecked: what a nightly record holds (a record of a case too broken to rebuild may hold empty parts);
    CaseId is the checked form every case has."""

    suite: str
    op: str
    config: str
    direction: str
    dtype: str
    layout: str
    range: str

    @property
    def values(self) -> tuple[str, str, str, str, str, str, str]:
        """The parts in PARTS order (not dataclasses.astuple: its deep copies are slow)."""
        return (self.suite, self.op, self.config, self.direction, self.dtype, self.layout, self.range)

    def as_dict(self) -> dict[str, str]:
        """{part name: value}, in PARTS order."""
        return dict(zip(PARTS, self.values))

    def unchecked(self) -> "CaseIdParts":
        """The same parts as a plain CaseIdParts (what a record holds, whether built from a CaseId or read back)."""
        return CaseIdParts(*self.values)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "CaseIdParts":
        """The parts a mapping holds under their names, as text; a missing part is empty."""
        return cls(*(str(data.get(part, "")) for part in PARTS))

    def __str__(self) -> str:
        return SEPARATOR.join(self.values)


@dataclass(frozen=True, order=True)
class CaseId(CaseIdParts):
    """A case's id, checked: every part a non-empty name without the separator."""

    def __post_init__(self) -> None:
        parts = self.values
        if all(type(part) is str and part and SEPARATOR not in part for part in parts):
            return  # the common case, checked cheaply: ids are built for every case of every collection
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value or SEPARATOR in value:
                raise ValueError(f"case id part {f.name} must be a non-empty name without {SEPARATOR!r}, got {value!r}")

    @classmethod
    def parse(cls, text: str) -> "CaseId":
        """The id's parts; ValueError naming what a valid id looks like when `text` is not one."""
        parts = text.split(SEPARATOR) if isinstance(text, str) else []
        if len(parts) != len(PARTS):
            raise ValueError(f"{text!r} is not a case id: expected {len(PARTS)} parts {SEPARATOR.join(PARTS)}")
        return cls(*parts)

    @property
    def without_range(self) -> str:
        """The id less its range: one problem, whatever range its inputs are drawn from (studies draw their own)."""
        return str(self).rpartition(SEPARATOR)[0]

    @property
    def axes(self) -> dict[str, str]:
        """The axis values a filter or an exclude can match: config, dtype, direction, layout, range."""
        return {"config": self.config, "dtype": self.dtype, "direction": self.direction, "layout": self.layout,
                "range": self.range}


PARTS = tuple(f.name for f in fields(CaseIdParts))
