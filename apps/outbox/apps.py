from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "jobweaver.outbox"
    label = "jobweaver_outbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Django's place for connecting receivers: the models are loaded by now.
        from jobweaver.engine.signals import events_committed
        from jobweaver.outbox.services import relay_on_events_committed

        events_committed.connect(relay_on_events_committed, dispatch_uid="outbox-relay")
