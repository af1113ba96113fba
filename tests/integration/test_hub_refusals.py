"""A Hub that refuses the refs listing: a gated repository (403) and an unknown one (401 RepoNotFound).

The Hub on 127.0.0.1 is tests/integration/fake_hub.py answering as the real Hub does (status and
X-Error-Code); huggingface_hub's own client turns that into its errors, and HubSource into one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_hub import fake_hub
from kernel_factory.errors import Unreachable, UsageError
from kernel_factory.sources.hub import HubSource

pytestmark = pytest.mark.integration


@pytest.fixture
def hub_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))


def test_unknown_repository_tries_each_type(hub_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_hub() as hub:
        hub.refs_error = (401, {"X-Error-Code": "RepoNotFound"})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(UsageError) as info:
            HubSource("a/b").refs()
    assert str(info.value) == (f"no kernel repository a/b on {hub.url} (tried kernel and model types); "
                               "check the repository id and HF_ENDPOINT")
    assert [path for path, _ in hub.seen] == ["/api/kernels/a/b/refs", "/api/models/a/b/refs"]


def test_gated_repository_says_how_to_get_in(hub_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_hub() as hub:
        hub.refs_error = (403, {"X-Error-Code": "GatedRepo"})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(Unreachable) as info:
            HubSource("a/b").refs()
    assert str(info.value) == (f"a/b on {hub.url} is gated; accept its terms on the Hub and set HF_TOKEN to a "
                               "token of that account")
    assert [path for path, _ in hub.seen] == ["/api/kernels/a/b/refs"]  # no other type tried: it exists, gated
