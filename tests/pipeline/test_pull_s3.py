"""pull from s3:// against a real S3 API: moto's server (``moto[server]``, started by the test on a
local port; no AWS account is reachable from here, which is why it stands in), read through s3fs
as a lab's bucket would be.  The server answers listings in pages of ten keys (moto's
``MOTO_S3_DEFAULT_MAX_KEYS``; S3's own pages hold 1,000), so 25 archives make a listing of three pages:
the second night, with one new archive, lists the bucket and reads only that archive's bytes; a rewritten object (new ETag, same key) is read and
refused as a changed archive."""
from __future__ import annotations

import os

import pytest

from pipelines.storage import manifest, sources

pytestmark = pytest.mark.slow
PAGE, N = 10, 25                # keys per listing page, archives in the bucket


@pytest.fixture()
def s3(monkeypatch):
    import boto3
    import fsspec
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))  # state is per process
    monkeypatch.setenv("MOTO_S3_DEFAULT_MAX_KEYS", str(PAGE))     # read by the server at each listing
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}.items():
        monkeypatch.setenv(key, value)
    fsspec.filesystem("s3").clear_instance_cache()
    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket="lab")
    yield client
    server.stop()


def test_a_second_night_on_s3_reads_only_the_new_archive(s3, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: s3.put_object(Bucket="lab", Key=f"runs/shop-run-{i:04d}.tar.gz",
                                              Body=os.urandom(512)), range(N)))
    page = s3.list_objects_v2(Bucket="lab", Prefix="runs/")
    assert page["KeyCount"] == PAGE and page["IsTruncated"]          # every listing below spans pages
    raw = tmp_path / "raw"
    first = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert len(first["new"]) == N and first["bytes_read"] == 512 * N and not first["missing_sources"]
    entries = manifest.read_manifest(raw / "manifest.jsonl")
    assert entries["shop-run-0000"].marker.startswith("ETag:")

    s3.put_object(Bucket="lab", Key="runs/shop-run-new.tar.gz", Body=os.urandom(700))
    second = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert second["new"] == ["shop-run-new"]
    assert second["listed_known"] == N and second["bytes_read"] == 700

    s3.put_object(Bucket="lab", Key="runs/shop-run-0007.tar.gz", Body=os.urandom(512))   # rewritten in place
    third = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 20)
    assert third["bytes_read"] == 512 and third["listed_known"] == N
    assert [r["run_id"] for r in third["refused"]] == ["shop-run-0007"]
    assert "content changed" in third["refused"][0]["reason"]


def test_a_run_directory_under_a_prefix_is_pulled_like_an_archive(s3, tmp_path):
    """A lab's run directory kept in the bucket (a prefix holding run.yaml and the tools' files) is
    copied whole into data/raw, converted when read, and known from the listing the next night."""
    from pathlib import Path

    from pipelines import config
    from pipelines.importers import run_directory

    k6 = (Path(__file__).resolve().parents[1] / "data" / "formats" / "k6" / "taurus_k6_kpi_2021-10.csv")\
        .read_bytes()
    run_yaml = b"system: shop\nversion: '2.4.1'\nverdict: pass\ncause: none\n"
    s3.put_object(Bucket="lab", Key="runs/night-7/run.yaml", Body=run_yaml)
    s3.put_object(Bucket="lab", Key="runs/night-7/k6/results.csv", Body=k6)
    s3.put_object(Bucket="lab", Key="runs/notes/readme.txt", Body=b"not a run")       # a prefix, not a run
    raw = tmp_path / "raw"
    first = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 24)
    assert first["new"] == ["night-7"] and first["bytes_read"] == len(run_yaml) + len(k6)
    assert (raw / "night-7" / "k6" / "results.csv").read_bytes() == k6
    run = run_directory.read_run(raw / "night-7", config.load_params("validate")["limits"],
                                 config.load_params("ingest"))
    assert run.meta["system"] == "shop" and "loadgen" in run.csv_bytes
    second = sources.pull(["s3://lab/runs"], raw, max_archive_bytes=1 << 24)
    assert second["new"] == [] and second["listed_known"] == 1 and second["bytes_read"] == 0
