"""Store every phone number in one spelling (digits, leading + kept), as the contact services now do.

A phone saved as '+1 (555) 010-0000' received SMS (the provider normalises) but an inbound STOP from
'+15550100000' did not find it. A stored value that is not a phone number at all is left as it was.
"""

from django.db import migrations

from contacts.domain.model import ContactError, normalize_phone


def normalize_stored_phones(apps, schema_editor):
    contact_model = apps.get_model("contacts", "Contact")
    respelled = []
    for pk, phone in contact_model.objects.exclude(phone="").values_list("pk", "phone").iterator(chunk_size=2000):
        try:
            spelled = normalize_phone(phone)
        except ContactError:
            continue
        if spelled != phone:
            respelled.append(contact_model(pk=pk, phone=spelled))
    contact_model.objects.bulk_update(respelled, ["phone"], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("contacts", "0002_contact_phone_index")]

    operations = [migrations.RunPython(normalize_stored_phones, migrations.RunPython.noop)]
