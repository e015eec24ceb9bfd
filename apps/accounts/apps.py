from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "jobweaver.accounts"
    label = "jobweaver_accounts"
    verbose_name = "API access"
    default_auto_field = "django.db.models.BigAutoField"
