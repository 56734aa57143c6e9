"""Workflows built in Python: builders are classmethods of job classes, a released step's job
is built from its inputs."""

from __future__ import annotations

import pytest

from queuey.errors import ConfigError
from queuey.workflows import STEP_KEY, StepFailed, built_job, chain, group
from tests.integration.postgres.workflow_app import Count, Double, Fetch, Sum


def test_a_released_step_is_built_from_its_inputs() -> None:
    one = {STEP_KEY: {"builder": "from_page", "many": False, "inputs": [{"body": "abc"}]}}
    assert built_job(Count, one) == Count(text="abc")
    failed = {"queuey_failed": {"job_id": "j", "error": "boom"}}
    many = {STEP_KEY: {"builder": "from_some", "many": True, "inputs": [3, failed, 4]}}
    assert built_job(Sum, many) == Sum(counts=[3, 4], failed=["boom"])
    assert built_job(Double, {"n": 2}) == Double(n=2)


def test_a_builder_must_be_a_classmethod_of_a_job_class() -> None:
    with pytest.raises(ConfigError, match="not a classmethod of a job class"):
        chain(Fetch(url="a"), lambda page: Count(text=page.body))
    with pytest.raises(ConfigError, match="at least one member"):
        group()
    assert isinstance(StepFailed(job_id="x"), StepFailed)
