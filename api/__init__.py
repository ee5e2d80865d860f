"""The REST API's shared kernel: the conventions every app's `<app>/api/` package builds on.

An app of its own (as HackSoft's styleguide keeps `api/`), so that `config/` stays the composition root
(settings, urls, wsgi, asgi) and no app imports it.

problems    RFC 9457 problem details for every error, and the problem exception classes
views       ApiView, AccountView, OperatorView: the base classes of every endpoint
filters     declared, validated query filters (unknown values -> 400 naming the allowed ones)
pagination  cursor pagination, newest first, page size capped
throttling  per-token rate limit (429 + Retry-After)
middleware  body size limit (413) before anything reads the body
parsers     strict JSON: no NaN, no NUL characters, no lone surrogates, bounded nesting
serializers StrictSerializer: request bodies that refuse unknown fields, naming them
converters  <api_id:...>: integer ids that fit a bigint (longer ones are simply 404)
schema      drf-spectacular glue: bearer auth, problem responses on every operation
urls        /api/v1/: each app's `api/urls.py`, the schema and the docs
"""
