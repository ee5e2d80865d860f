"""How many jobs an executor claims at once: what it will start soon, and more when a batch handler takes them."""

from jobs.application.worker import BATCH_TARGET_SECONDS, GROUP_TARGET_SECONDS, batch_limit


def test_a_first_claim_takes_a_few_jobs():
    assert batch_limit(0.0, 100) == 10


def test_one_by_one_jobs_are_claimed_for_about_fifty_milliseconds_of_work():
    assert batch_limit(0.005, 100) == int(BATCH_TARGET_SECONDS / 0.005) == 10
    assert batch_limit(2.0, 100) == 1  # a slow job is claimed alone, not held unstarted behind another


def test_jobs_for_a_batch_handler_are_claimed_for_longer_since_all_start_at_once():
    assert batch_limit(0.005, 1000, GROUP_TARGET_SECONDS) == int(GROUP_TARGET_SECONDS / 0.005) == 100
    assert batch_limit(0.005, 1000, GROUP_TARGET_SECONDS) > batch_limit(0.005, 1000)


def test_the_configured_batch_size_caps_every_claim():
    assert batch_limit(0.0001, 100, GROUP_TARGET_SECONDS) == 100
