"""A case's id: the one place that formats it and takes it apart.

    resnet50/conv2d/3x3-64/bwd_data/f16/nhwc/r0
    suite   /op    /config/direction/dtype/layout/range

Suite and config names cannot contain "/" (the catalogue's name pattern), so
the seven parts always parse back.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

SEPARATOR = "/"


@dataclass(frozen=True, order=True)
class CaseId:
    suite: str
    op: str
    config: str
    direction: str
    dtype: str
    layout: str
    range: str

    def __post_init__(self) -> None:
        parts = (self.suite, self.op, self.config, self.direction, self.dtype, self.layout, self.range)
        if all(type(part) is str and part and SEPARATOR not in part for part in parts):
            return  # the common case, checked cheaply: ids are built for every case of every collection
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value or SEPARATOR in value:
                raise ValueError(f"case id part {f.name} must be a non-empty name without {SEPARATOR!r}, got {value!r}")

    def __str__(self) -> str:
        # Not dataclasses.astuple: its deep copies made ids the slowest step of expanding 10,000 cases.
        return SEPARATOR.join((self.suite, self.op, self.config, self.direction, self.dtype, self.layout, self.range))

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


PARTS = tuple(f.name for f in fields(CaseId))
