from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "apps.outbox"
    label = "outbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Django's place for connecting receivers: the models are loaded by now.
        from apps.engine.signals import events_committed
        from apps.outbox.services import relay_on_events_committed

        events_committed.connect(relay_on_events_committed, dispatch_uid="outbox-relay")
