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


def distinct_tags(account_id: int, limit: int) -> list[str]:
    """The tags the account's contacts carry, alphabetical, at most `limit` of them."""
    table = connection.ops.quote_name(Contact._meta.db_table)
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT DISTINCT t FROM {table}, jsonb_array_elements_text({table}.tags) AS t "  # noqa: S608
            "WHERE account_id = %s AND jsonb_typeof(tags) = 'array' ORDER BY t LIMIT %s"
        )
    else:
        sql = (
            f"SELECT DISTINCT j.value FROM {table}, json_each({table}.tags) AS j "  # noqa: S608
            "WHERE account_id = %s ORDER BY j.value LIMIT %s"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, [account_id, limit])
        return [str(row[0]) for row in cursor.fetchall()]


def distinct_custom_fields(account_id: int, limit: int) -> list[str]:
    """The custom field names the account's contacts have, alphabetical, at most `limit` of them."""
    table = connection.ops.quote_name(Contact._meta.db_table)
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT DISTINCT k FROM {table}, jsonb_object_keys({table}.custom_fields) AS k "  # noqa: S608
            "WHERE account_id = %s AND jsonb_typeof(custom_fields) = 'object' ORDER BY k LIMIT %s"
        )
    else:
        sql = (
            f"SELECT DISTINCT j.key FROM {table}, json_each({table}.custom_fields) AS j "  # noqa: S608
            "WHERE account_id = %s ORDER BY j.key LIMIT %s"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, [account_id, limit])
        return [str(row[0]) for row in cursor.fetchall()]
