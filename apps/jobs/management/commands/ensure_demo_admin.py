from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from apps.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand


class Command(JobWeaverCommand):
    help = "Dev stack only: create the demo superuser admin/admin (and its API token) if missing."

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
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"demo login: {username} / {password}   API token: {token.key}")
