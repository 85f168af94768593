"""Helpers shared by the tests (not tests themselves)."""
