"""A module whose own code fails when imported, as a user's module with a bug does."""

raise RuntimeError("this module fails on import")
