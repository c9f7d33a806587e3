"""The in-memory conditional-request cache: one live entry per resource, whatever token
variant last stored it."""

from __future__ import annotations

import threading

from service.model.etags import ETagStore, Validators, resource_of


def test_a_key_names_its_resource_up_to_its_last_hash() -> None:
    assert resource_of("GET /repos/o/r/pulls?state=all#tok1") == "GET /repos/o/r/pulls?state=all"
    assert resource_of("GET /a#b#c") == "GET /a#b"
    assert resource_of("GET /repos/o/r") == "GET /repos/o/r"


def test_storing_a_variant_replaces_the_other_variants_of_that_resource_only() -> None:
    store = ETagStore()
    store.put_validators("GET /pulls#old-token", Validators('"v1"'))
    store.put_validators("GET /issues#old-token", Validators('"i1"', "Mon, 01 Jun 2026"))
    store.put_validators("GET /pulls#new-token", Validators('"v2"'))
    assert store.get_validators("GET /pulls#old-token") is None  # rotated away
    assert store.get_validators("GET /pulls#new-token") == Validators('"v2"')
    assert store.get_validators("GET /issues#old-token") == Validators('"i1"',
                                                                       "Mon, 01 Jun 2026")
    store.put_validators("GET /pulls#new-token", Validators('"v3"'))  # same key: replaced
    assert store.get_validators("GET /pulls#new-token") == Validators('"v3"')


def test_threads_storing_variants_of_one_resource_leave_exactly_one() -> None:
    store = ETagStore()
    barrier = threading.Barrier(8)

    def put(index: int) -> None:
        barrier.wait()
        for round_ in range(200):
            store.put_validators(f"GET /pulls#token{index}", Validators(f'"{round_}"'))

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    live = [i for i in range(8) if store.get_validators(f"GET /pulls#token{i}") is not None]
    assert len(live) == 1
