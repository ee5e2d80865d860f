"""The queue's REST API, as other apps' endpoints and the URL map reuse it.

- the bulk operations' request and answer (`BulkFilterIn`, `DRY_RUN`, `bulk_request`, `BulkOut`,
  `bulk_answer`), so another app's bulk endpoint (runs) reads and answers as the jobs' does;
- `metrics_view`, the Prometheus endpoint, mounted by the project's URL map.
"""

from jobs.api.bulk import DRY_RUN, BulkFilterIn, BulkOut, bulk_answer, bulk_request
from jobs.api.metrics import metrics_view

__all__ = ["DRY_RUN", "BulkFilterIn", "BulkOut", "bulk_answer", "bulk_request", "metrics_view"]
