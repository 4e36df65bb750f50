"""The CLI verbs take URLs and --storage-option KEY=VALUE."""

from __future__ import annotations

import json

import numpy as np
import pytest
from remote_samples import BUCKET

import arrayio
from arrayio import kast
from arrayio.cli import storage_options_of

# The CLI's verbs and options are what these tests are about (subprocesses, slow); both clients' reads are
# tested in test_remote_read.py and the others.
REMOTE_CLIENTS = ("obstore",)


def _s3_flags(s3_options) -> list[str]:
    return ["--storage-option", "key=testing", "--storage-option", "secret=testing",
            "--storage-option", f"client_kwargs.endpoint_url={s3_options['client_kwargs']['endpoint_url']}",
            "--storage-option", "client_kwargs.region_name=us-east-1"]


def test_storage_options_nest_and_parse_json():
    assert storage_options_of(["anon=true", "client_kwargs.endpoint_url=http://h:1", "block_size=1024",
                               "client_kwargs.region_name=eu"]) == {
        "anon": True, "block_size": 1024, "client_kwargs": {"endpoint_url": "http://h:1", "region_name": "eu"}}


def test_info_ls_cat_validate_over_http(cli, http_server, samples):
    path = samples("kastore/reference")
    url = http_server.put("cli/store.kas", path.read_bytes())
    result = cli("info", "--json", url)
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout) == json.loads(json.dumps(arrayio.info(path), default=str))
    assert cli("ls", url).stdout.decode().split() == ["big", "other", "small"]
    assert cli("cat", url, "small").stdout.decode().split() == [str(value) for value in range(100)]
    result = cli("validate", url)
    assert result.returncode == 0 and "valid kastore file" in result.stdout.decode()


def test_verbs_on_s3_with_storage_options(cli, s3_put, s3_options, samples):
    url = s3_put("cli/episodes.kdb", samples("kdb/ours").read_bytes())
    flags = _s3_flags(s3_options)
    result = cli("info", "--json", url, *flags)
    assert result.returncode == 0, result.stderr.decode()
    assert json.loads(result.stdout)["format"] == "kdb"
    assert cli("validate", url, *flags).returncode == 0
    assert len(json.loads(cli("ls", "--json", url, *flags).stdout)) == 12


def test_convert_between_buckets(cli, s3_put, s3_options, samples):
    source = s3_put("cli/convert.kas", samples("kastore/ours").read_bytes())
    target = f"s3://{BUCKET}/cli/converted.kast"
    result = cli("convert", source, target, *_s3_flags(s3_options))
    assert result.returncode == 0, result.stderr.decode()
    with kast.load(target, storage_options=s3_options) as converted, \
            arrayio.open(samples("kastore/ours")) as original:
        assert list(converted) == list(original)
        assert all(np.array_equal(converted[key], original[key]) for key in original)


@pytest.mark.parametrize("verb", ["info", "validate", "ls"])
def test_remote_errors_are_one_line(cli, http_server, verb):
    result = cli(verb, f"{http_server.url}/cli/absent.kas")
    assert result.returncode == 1
    assert b"Traceback" not in result.stderr
    assert b"cli/absent.kas" in result.stderr + result.stdout


def test_storage_options_need_a_url(cli, samples):
    result = cli("info", samples("kastore/ours"), "--storage-option", "anon=true")
    assert result.returncode == 2 and b"URLs only" in result.stderr
