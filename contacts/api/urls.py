from django.urls import path

from api import converters  # noqa: F401 - registers <api_id:...>
from contacts.api import views

urlpatterns = [
    path("contacts", views.ContactListView.as_view(), name="api-contact-list"),
    path("contacts/<api_id:contact_id>", views.ContactDetailView.as_view(), name="api-contact-detail"),
    path("contacts/<api_id:contact_id>/tags", views.ContactTagsView.as_view(), name="api-contact-tags"),
    path("contacts/<api_id:contact_id>/tags/<path:tag>", views.ContactTagView.as_view(), name="api-contact-tag"),
]
