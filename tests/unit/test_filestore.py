"""The folders the WARC export's tasks write to: local, and S3 (moto on 127.0.0.1) through
boto3 configured from the s3a keys."""

from __future__ import annotations

import pytest

from crawllib.config import load_config
from crawllib.store import filestore
from tests.s3server import moto_s3


@pytest.fixture(scope="module")
def s3_cfg():
    """moto's S3 on 127.0.0.1 with a bucket (tests.s3server)."""
    with moto_s3("warc-bucket") as cfg:
        yield cfg


def test_locations_name_local_folders_or_s3_prefixes(tmp_path):
    cfg = load_config()
    assert filestore.folder_at(str(tmp_path), cfg) == filestore.LocalFolder(str(tmp_path))
    assert filestore.folder_at(tmp_path.as_uri(), cfg) == filestore.LocalFolder(str(tmp_path))
    s3 = filestore.folder_at("s3a://bucket/a/warc/", cfg)
    assert isinstance(s3, filestore.S3Folder)
    assert (s3.bucket, s3.prefix, s3.location("x.gz")) == (
        "bucket",
        "a/warc",
        "s3a://bucket/a/warc/x.gz",
    )
    with pytest.raises(ValueError, match="an S3 URI"):
        filestore.folder_at("hdfs://namenode/warc", cfg)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_put_list_delete(where, tmp_path, request):
    if where == "local":
        folder: filestore.Folder = filestore.LocalFolder(str(tmp_path / "out"))
    else:
        cfg = request.getfixturevalue("s3_cfg")
        folder = filestore.folder_at(f"s3a://warc-bucket/{tmp_path.name}/warc", cfg)
    assert folder.sizes() == {}
    with folder.staging() as work:
        for name, data in [("a.warc.gz", b"aaa"), ("b.warc.gz", b"bb")]:
            path = f"{work}/{name}"
            with open(path, "wb") as f:
                f.write(data)
            assert folder.put(path) == folder.location(name)
    assert folder.sizes() == {"a.warc.gz": 3, "b.warc.gz": 2}
    folder.delete("a.warc.gz")
    folder.delete("never-there")
    assert folder.sizes() == {"b.warc.gz": 2}


def test_the_archive_root_is_root_warc_unless_the_setting_names_one(tmp_path, monkeypatch):
    """export-warc writes under it (gen=N/); ccindex's warc_filename is relative to it."""
    from crawllib.stages.export import default_out_dir

    root = str(tmp_path / "crawl")
    default = load_config()
    assert filestore.archive_root(root, default) == f"{root}/warc"
    assert default_out_dir(root, 4, default) == f"{root}/warc/gen=4"
    assert filestore.archive_prefix(root, default) == f"{root}/warc/"
    on_s3 = load_config(overrides=["warc.archive_root=s3a://bucket/warc/"])
    assert default_out_dir(root, 0, on_s3) == "s3a://bucket/warc/gen=0"
    assert filestore.archive_prefix(root, on_s3) == "s3a://bucket/warc/"
    uri = load_config(overrides=[f"warc.archive_root=file:{tmp_path}/a"])
    assert filestore.archive_prefix(root, uri) == f"{tmp_path}/a/"  # as LocalFolder writes
    monkeypatch.chdir(tmp_path)
    relative = load_config(overrides=["warc.archive_root=archive"])
    assert filestore.archive_prefix("crawl", relative) == f"{tmp_path}/archive/"
