"""Every model change ships with its migration: a deploy runs `migrate`, never
`makemigrations`, so a field changed without one would leave the schema behind the code."""

from __future__ import annotations

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_models_and_their_migrations_agree():
    # --check exits non-zero (SystemExit) when a migration is missing; --dry-run writes none.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
