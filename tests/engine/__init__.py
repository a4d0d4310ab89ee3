"""Tests of the episode engine: one folder per sub-package (``engine/<part>``), its loose modules here."""
