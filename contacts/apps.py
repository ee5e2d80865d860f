from django.apps import AppConfig


class ContactsConfig(AppConfig):
    name = "contacts"
    verbose_name = "Contacts"

    def ready(self) -> None:
        from contacts.application import imports  # noqa: F401 - registers the contacts.import job handler
