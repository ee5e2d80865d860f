import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0006_account_track_email_engagement"),
        ("contacts", "0006_contact_event"),
        ("integrations", "0002_inbound_sms_message"),
    ]

    operations = [
        migrations.CreateModel(
            name="SmsConversation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("from_number", models.CharField(max_length=32)),
                ("to_number", models.CharField(max_length=32)),
                ("last_sent_at", models.DateTimeField()),
                ("last_message_id", models.CharField(blank=True, default="", max_length=64)),
                (
                    "account",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.account"
                    ),
                ),
                (
                    "contact",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="contacts.contact"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["to_number", "from_number"], name="sms_conversation_by_phone")],
                "constraints": [
                    models.UniqueConstraint(fields=("contact", "from_number"), name="sms_conversation_once")
                ],
            },
        ),
    ]
