from django.core.management.base import BaseCommand

from jobweaver.scheduler.beat import beat_schedule_setup


class Command(BaseCommand):
    help = "Create or update JobWeaver's periodic tasks in the django-celery-beat schedule."

    def handle(self, *args, **options):
        for name in beat_schedule_setup():
            self.stdout.write(f"scheduled: {name}")
