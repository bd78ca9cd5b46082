"""Studies behind the project's documented choices (see docs/). Not part of the installed package."""
