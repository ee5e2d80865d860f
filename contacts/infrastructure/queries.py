"""Queries the ORM does not express the same way on every database."""

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from contacts.infrastructure.models import Contact


def having_tag(queryset: QuerySet[Contact], tag: str) -> QuerySet[Contact]:
    """Contacts whose tag list holds `tag` (already normalized).

    PostgreSQL: jsonb containment (`tags @> '["vip"]'`). SQLite has no
    containment for JSON, so it looks through json_each, comparing whole
    elements (a substring match would find "vip" in "vip-lapsed").
    """
    if connection.vendor == "postgresql":
        return queryset.filter(tags__contains=[tag])
    table = connection.ops.quote_name(Contact._meta.db_table)
    # The table name is the model's own, quoted; the tag is a bound parameter.
    holds = RawSQL(  # noqa: S611
        f"EXISTS (SELECT 1 FROM json_each({table}.tags) WHERE json_each.value = %s)",  # noqa: S608
        [tag],
        output_field=BooleanField(),
    )
    return queryset.filter(holds)
