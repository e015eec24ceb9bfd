from django.core.management.base import BaseCommand

from jobweaver.core.kafka import ensure_topics


class Command(BaseCommand):
    help = "Create JobWeaver's Kafka topics with their partition counts (idempotent)."

    def handle(self, *args, **options):
        created = ensure_topics()
        self.stdout.write(
            f"topics created: {', '.join(created) if created else 'none (all exist)'}"
        )
