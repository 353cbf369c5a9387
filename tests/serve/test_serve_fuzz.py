"""Property-based fuzzing of the OpenAPI spec: nothing a client sends gets a 5xx, and every
answer matches its documented schema and status codes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from tests.serve.fakes import fake_engine, write_index_dir

from ragsieve.serve.app import ServeSettings, create_app

_INDEX = write_index_dir(Path(tempfile.mkdtemp(prefix="ragsieve-fuzz-")) / "index")
APP = create_app(fake_engine(_INDEX), ServeSettings(deadline_s=10))
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_never_fails_on_client_input(case: schemathesis.Case) -> None:
    # Every built-in check, not_a_server_error included, except that a schema-valid request
    # must succeed: some are refused on meaning with a 400 (a domain the index lacks, an option
    # the chosen pipeline does not take), which the spec cannot express.
    case.call_and_validate(excluded_checks=[positive_data_acceptance])


def test_openapi_documents_every_endpoint() -> None:
    paths = set(APP.openapi()["paths"])
    assert {"/v1/ask", "/v1/search", "/v1/classify", "/v1/chat/completions", "/v1/health", "/metrics"} <= paths


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("ERROR")


@pytest.fixture(scope="module", autouse=True)
def _audit_loaded() -> None:
    """The first ``/v1/audit`` loads the audit's libraries (2 s on a busy machine, where the test
    suite shares the cores with another worker); asked once here, so that the fuzzed requests'
    10 s read timeout times each request, not that one load."""
    from starlette.testclient import TestClient

    assert TestClient(APP).get("/v1/audit").status_code == 200
