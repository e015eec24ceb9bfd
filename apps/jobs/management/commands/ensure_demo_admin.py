from django.contrib.auth import get_user_model

from jobweaver.accounts.services import api_token_rotate
from jobweaver.conf import settings
from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand


class Command(JobWeaverCommand):
    help = (
        "Dev stack only: create the demo superuser admin/admin if missing, and print a fresh "
        "API token for it (the previous demo token is revoked: keys are stored hashed)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default="admin")

    def handle(self, *args, username, password, **options):
        if not settings.DEBUG:
            raise CommandExit(
                "refusing to create a demo admin with DJANGO_DEBUG off", returncode=EXIT_FAILED
            )
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is None:
            user = user_model.objects.create_superuser(
                username, f"{username}@example.com", password
            )
            self.stdout.write(f"created superuser {username}")
        # Only a hash of a key is kept, so the old demo key cannot be shown again: replace it.
        key = api_token_rotate(user=user, name="demo").key
        self.stdout.write(f"demo login: {username} / {password}   API token: {key}")
