import gc
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=600, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def no_leaked_exports():
    """Fails the test if it leaves engine-exported Arrow structs unreleased."""
    from pyarrow_ops import _engine

    gc.collect()
    before = _engine.live_exports()
    yield
    gc.collect()
    assert _engine.live_exports() == before
