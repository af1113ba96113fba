"""HubSource parts that need no network: ids, environment, the offline cache, error mapping."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
from kernel_factory.errors import EXIT_UNREACHABLE, Unreachable, UsageError, VersionNotFound
from kernel_factory.safe_text import redact_url
from kernel_factory.sources.hub import HubSource, _looks_like_tag, ref_problem

SHA1, SHA2 = "a" * 40, "b" * 40


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    repo = tmp_path / "kernels--kernels-community--relu"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SHA2)
    (repo / "refs" / "v1").write_text(SHA1)
    (repo / "refs" / "v1.0.2").write_text(SHA1)
    (repo / "snapshots" / SHA1).mkdir(parents=True)
    return tmp_path


def test_bad_ids() -> None:
    for bad in ("relu", "a/b/c", "/relu", "org/"):
        with pytest.raises(UsageError, match="org/name"):
            HubSource(bad)
    with pytest.raises(UsageError, match="repository type 'dataset'"):
        HubSource("a/b", repo_type="dataset")


def test_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1234/")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "true")
    src = HubSource("kernels-community/relu")
    assert (src.endpoint, src.cache_dir, src.offline) == ("http://127.0.0.1:1234", str(tmp_path / "hub"), True)
    assert (src.name, src.display, src.repo_id) == ("relu", "kernels-community/relu", "kernels-community/relu")


def test_offline_refs_and_resolve(offline_cache: Path) -> None:
    src = HubSource("kernels-community/relu")
    refs = src.refs()
    assert refs.branches == {"main": SHA2, "v1": SHA1}
    assert refs.tags == {"v1.0.2": SHA1}
    assert src.repo_type == "kernel"
    assert src.resolve("v1") == SHA1
    assert src.resolve("aaaa") == SHA1  # a short sha found among cached snapshots
    with pytest.raises(VersionNotFound, match="no revision 'v9'.*in the offline cache"):
        src.resolve("v9")
    with pytest.raises(Unreachable, match="not available with HF_HUB_OFFLINE set"):
        src.commit_count(SHA1)


def test_offline_model_type_and_missing(offline_cache: Path) -> None:
    (offline_cache / "models--old--relu" / "refs").mkdir(parents=True)
    (offline_cache / "models--old--relu" / "refs" / "v2").write_text(SHA2)
    src = HubSource("old/relu")
    assert src.resolve("v2") == SHA2 and src.repo_type == "model"
    with pytest.raises(Unreachable) as info:
        HubSource("kernels-community/gelu").refs()
    assert info.value.exit_code == EXIT_UNREACHABLE
    assert "run once online" in str(info.value)


def test_tag_names() -> None:
    assert _looks_like_tag("v1.0.2") and _looks_like_tag("v0.1")
    assert not _looks_like_tag("v1") and not _looks_like_tag("main") and not _looks_like_tag("v1.x")


def _http_error(code: int, headers: dict[str, str] | None = None) -> HfHubHTTPError:
    request = httpx2.Request("GET", "http://127.0.0.1:9/api/kernels/a/b/refs")
    return HfHubHTTPError(f"{code} error", response=httpx2.Response(code, request=request, headers=headers))


def test_busy_hub_is_retried_honouring_retry_after_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("KERNEL_FACTORY_RETRY_S", "3")
    src = HubSource("a/b")
    answers = [_http_error(429, {"Retry-After": "0"}), _http_error(503, {"Retry-After": "0"})]

    def flaky() -> str:
        if answers:
            raise answers.pop(0)
        return "refs"

    assert src._call("listing refs", flaky) == "refs" and answers == []

    def busy() -> str:
        raise _http_error(503, {"Retry-After": "1"})

    with pytest.raises(Unreachable) as info:
        src._call("listing refs", busy)
    msg = str(info.value)
    assert info.value.exit_code == EXIT_UNREACHABLE and "\n" not in msg
    assert "HTTP 503; the Hub is busy or unavailable" in msg and "gave up after " in msg, msg


def test_a_connection_reset_mid_transfer_is_retried_a_refused_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("KERNEL_FACTORY_RETRY_S", "30")
    monkeypatch.setattr("kernel_factory.retry.time.sleep", lambda s: None)
    src = HubSource("a/b")
    answers: list[Exception] = [httpx2.ReadError("[Errno 104] Connection reset by peer"),
                                httpx2.RemoteProtocolError("peer closed connection")]

    def flaky() -> str:
        if answers:
            raise answers.pop(0)
        return "file"

    assert src._call("build/x", flaky) == "file" and answers == []

    calls = []

    def refused() -> str:
        calls.append(1)
        raise httpx2.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(Unreachable) as info:
        src._call("build/x", refused)
    assert calls == [1] and "ConnectError" in str(info.value)


@pytest.mark.parametrize(
    ("exc", "kind", "needle"),
    [
        (_http_error(401), Unreachable, "set HF_TOKEN"),
        (_http_error(403), Unreachable, "set HF_TOKEN"),
        (_http_error(503), Unreachable, "HTTP 503; the Hub is busy or unavailable"),
        (_http_error(500), Unreachable, "HTTP 500; the Hub is unavailable"),
        (_http_error(404), VersionNotFound, "HTTP 404"),
        (httpx2.ConnectError("refused"), Unreachable, "check HF_ENDPOINT and the network"),
        (ConnectionResetError("reset"), Unreachable, "ConnectionResetError"),
        (LocalEntryNotFoundError("nope"), Unreachable, "not in the huggingface_hub cache"),
    ],
)
def test_error_mapping(monkeypatch: pytest.MonkeyPatch, exc: Exception, kind: type[Exception], needle: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_topsecret")
    src = HubSource("a/b")
    with pytest.raises(kind) as info, src.errors("listing refs"):
        raise exc
    msg = str(info.value)
    assert needle in msg and msg.startswith("a/b on http://127.0.0.1:9: listing refs")
    assert "\n" not in msg and "hf_topsecret" not in msg


@pytest.mark.parametrize("name", ["/abs/x.pth", "../../x", "a/../../x", "a\\b", "v1\n", "v1\x00", "", "a//b", "./v1"])
def test_unsafe_ref_names(name: str) -> None:
    assert ref_problem(name, SHA1) is not None


@pytest.mark.parametrize("name", ["v1", "main", "pr/12", "v1.0.2", "refs-x_y"])
def test_safe_ref_names(name: str) -> None:
    assert ref_problem(name, SHA1) is None
    assert ref_problem(name, "not a sha") is not None


def test_redact_url() -> None:
    assert redact_url("http://user:pw@127.0.0.1:9/api failed") == "http://127.0.0.1:9/api failed"
    assert redact_url("see https://tok@host/x and http://host/y") == "see https://host/x and http://host/y"


def test_next_page_only_on_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://u:p@127.0.0.1:9")
    src = HubSource("kernels-community/relu")
    here = "http://127.0.0.1:9/api/kernels/kernels-community/relu/commits/x"
    assert src._next_page("the commits endpoint", here, "?page=2") == here + "?page=2"
    assert src._next_page("the commits endpoint", here, "http://127.0.0.1:9/p?page=3") == "http://127.0.0.1:9/p?page=3"
    assert src._next_page("the commits endpoint", here, None) is None
    for other in ("http://127.0.0.1:10/p", "https://127.0.0.1:9/p", "http://localhost:9/p", "//evil.invalid/p"):
        with pytest.raises(Unreachable) as info:
            src._next_page("the commits endpoint", here, other)
        assert "u:p" not in str(info.value) and "points its next page at another host" in str(info.value)
