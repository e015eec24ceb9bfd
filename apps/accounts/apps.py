from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "API access"
    default_auto_field = "django.db.models.BigAutoField"
