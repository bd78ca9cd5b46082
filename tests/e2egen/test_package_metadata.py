"""What a company's legal and typing checks read (issue 44): the licence in the installed metadata and its text
beside it, and PEP 561's marker so that type checkers read e2egen's annotations."""
from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_metadata_names_the_apache_licence_and_its_file():
    meta = metadata.metadata("e2egen")
    assert meta["License-Expression"] == "Apache-2.0"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_the_package_is_marked_typed():
    assert resources.files("e2egen").joinpath("py.typed").is_file()
