"""pull from s3:// against a real S3 API: moto's server (``moto[server]``, started by the test on a
local port; no AWS account is reachable from here, which is why it stands in), read through s3fs
as a lab's bucket would be.  1,000 archives; the second night, with one new archive, lists the
bucket and reads only that archive's bytes; a rewritten object (new ETag, same key) is read and
refused as a changed archive."""
from __future__ import annotations

import os

import pytest

from pipelines.storage import archive, sources

pytestmark = pytest.mark.slow


@pytest.fixture()
def s3(monkeypatch):
    import boto3
    import fsspec
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    fsspec.filesystem("s3").clear_instance_cache()
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="lab")
    yield client
    server.stop()


def test_a_second_night_on_s3_reads_only_the_new_archive(s3, tmp_path):
    for i in range(1000):
        s3.put_object(Bucket="lab", Key=f"runs/shop-run-{i:04d}.tar.gz", Body=os.urandom(512))
    raw = tmp_path / "raw"
    first = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert len(first["new"]) == 1000 and first["bytes_read"] == 512_000 and not first["missing_sources"]
    manifest = archive.read_manifest(raw / "manifest.jsonl")
    assert manifest["shop-run-0000"].marker.startswith("ETag:")

    s3.put_object(Bucket="lab", Key="runs/shop-run-new.tar.gz", Body=os.urandom(700))
    second = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert second["new"] == ["shop-run-new"]
    assert second["listed_known"] == 1000 and second["bytes_read"] == 700

    s3.put_object(Bucket="lab", Key="runs/shop-run-0007.tar.gz", Body=os.urandom(512))   # rewritten in place
    third = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert third["bytes_read"] == 512 and third["listed_known"] == 1000
    assert [r["run_id"] for r in third["refused"]] == ["shop-run-0007"]
    assert "content changed" in third["refused"][0]["reason"]
