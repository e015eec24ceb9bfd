"""API tokens: named, revocable, optionally expiring, and stored only as a hash.

The key itself is shown once, when it is created (`manage.py create_api_token`); the database
keeps its SHA-256, so a copy of the database or an admin page never discloses a usable token.
A plain hash suffices (no slow KDF): keys are 256 random bits, not guessable passwords.
"""

from __future__ import annotations

from django.db import models

from jobweaver.conf import settings


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="what the token is for, e.g. 'ci-deploy'")
    # The key's first characters, to tell tokens apart in lists and logs; never enough to use.
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A name stays free for a replacement once its token is revoked.
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=models.Q(revoked_at__isnull=True),
                name="jw_api_token_live_name_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class ThrottleBucket(models.Model):
    """A user's token bucket of one kind (apps/accounts/throttle.py): the tokens left at
    `updated_at`, refilled from the time elapsed since. Kept in PostgreSQL so every web process,
    thread and beat counts against the same bucket."""

    class Kind(models.TextChoices):
        SUBMIT = "submit", "submit, retry, and a schedule's firings"
        CANCEL = "cancel", "cancel"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    tokens = models.FloatField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="jw_one_bucket_per_user_kind")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}: {self.tokens:.1f}"
