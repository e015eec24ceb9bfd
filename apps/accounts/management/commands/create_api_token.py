"""`manage.py create_api_token <username> --name N [--expires-in-days D | --no-expiry]`: create
an API token and print its key, once. Only a hash is stored; a lost key is revoked and replaced.
Without either option the token expires after JOBWEAVER_API_TOKEN_DEFAULT_DAYS (90; 0: never).

Exit codes: 0 created; 2 bad input (unknown or inactive user, duplicate name, bad expiry).
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from jobweaver.accounts.services import DEFAULT_EXPIRY, api_token_create
from jobweaver.core.commands import CommandExit, JobWeaverCommand


class Command(JobWeaverCommand):
    help = (
        "Create a named API token for a user and print its key once (use it as "
        "'Authorization: Token <key>'). Exit status: 0 created, 2 bad input."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what the token is for")
        expiry = parser.add_mutually_exclusive_group()
        expiry.add_argument(
            "--expires-in-days",
            type=float,
            metavar="D",
            help="expire after D days (default: JOBWEAVER_API_TOKEN_DEFAULT_DAYS, 90)",
        )
        expiry.add_argument("--no-expiry", action="store_true", help="never expire (until revoked)")

    def handle(self, *args, username, name, expires_in_days, no_expiry, **options):
        user_model = get_user_model()
        try:
            user = user_model._default_manager.get_by_natural_key(username)
        except user_model.DoesNotExist:
            raise CommandExit(f"unknown user {username!r}") from None
        if not user.is_active:
            raise CommandExit(f"user {username!r} is inactive")
        expires_at = None if no_expiry else DEFAULT_EXPIRY
        if expires_in_days is not None:
            if not 0 < expires_in_days <= 3650:
                raise CommandExit("--expires-in-days must be between 0 and 3650")
            expires_at = timezone.now() + timedelta(days=expires_in_days)
        created = api_token_create(user=user, name=name, expires_at=expires_at)
        self.stdout.write(created.key)
        expiry = created.token.expires_at
        until = f"expires {expiry:%Y-%m-%d %H:%M} UTC" if expiry else "never expires"
        self.stderr.write(
            f"token {name!r} for {username} created ({until}); this is the only time its key "
            "is shown"
        )
