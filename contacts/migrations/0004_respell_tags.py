"""Respell every stored tag by today's rule: zero-width and other invisible format characters dropped.

A tag stored as 'vip\u200b' looked like 'vip' but never matched it, and once the services drop such
characters it could not even be removed ('vip\u200b' is now spelled 'vip'). A tag that is refused by
today's rule (blank once respelled, a control character) is left as it was, as 0003 left phones.
"""

from django.db import migrations

from contacts.domain.model import ContactError, normalize_tag


def respell_stored_tags(apps, schema_editor):
    contact_model = apps.get_model("contacts", "Contact")
    respelled = []
    for pk, tags in contact_model.objects.exclude(tags=[]).values_list("pk", "tags").iterator(chunk_size=2000):
        if not isinstance(tags, list):
            continue
        spelled: list = []
        for tag in tags:
            try:
                tag = normalize_tag(tag)
            except ContactError:
                pass
            if tag not in spelled:
                spelled.append(tag)
        if spelled != tags:
            respelled.append(contact_model(pk=pk, tags=spelled))
    contact_model.objects.bulk_update(respelled, ["tags"], batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [("contacts", "0003_normalize_phones")]

    operations = [migrations.RunPython(respell_stored_tags, migrations.RunPython.noop)]
