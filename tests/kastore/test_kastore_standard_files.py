"""The upstream test vectors: ten valid v1 stores and 27 malformed files (notes §3.1)."""

from __future__ import annotations

import pytest

import arrayio
import arrayio.kastore as kastore
from kastore_cases import DTYPE_NAMES, LOAD_MODE_IDS, LOAD_MODES, all_types, assert_same, load_file

SIZES = [760, 833, 858, 907, 932, 997, 1022, 1071, 1096, 1169]

MALFORMED = {
    "bad_magic_number": kastore.FileFormatError,
    "version_0": kastore.VersionTooOldError,
    "version_100": kastore.VersionTooNewError,
    "bad_type_11": kastore.FileFormatError,
    "bad_type_20": kastore.FileFormatError,
    **{f"bad_filesize_{n}_{d}": kastore.FileFormatError for n in (0, 10) for d in (-1, 1, 1024)},
    "truncated_file": kastore.FileFormatError,
    **{f"truncated_file_correct_size_{n}": kastore.FileFormatError for n in (100, 128, 129, 200)},
    "key_offset_outside_file": kastore.FileFormatError,
    "array_offset_outside_file": kastore.FileFormatError,
    "key_len_outside_file": kastore.FileFormatError,
    "array_len_outside_file": kastore.FileFormatError,
    "bad_key_start_-1": kastore.FileFormatError,
    "bad_key_start_1": kastore.FileFormatError,
    **{f"bad_array_start_{d}": kastore.FileFormatError for d in (-8, -1, 1, 8)},
}


def test_the_malformed_list_covers_the_folder(testdata):
    names = {path.stem for path in (testdata / "kastore" / "malformed").glob("*.kas")}
    assert names == set(MALFORMED) | {"empty_file"}
    assert len(names) == 27


@pytest.mark.parametrize("n", range(10))
def test_standard_file_size(testdata, n):
    path = testdata / "kastore" / "v1" / f"all_types_{n}_elements.kas"
    assert path.stat().st_size == SIZES[n]


@pytest.mark.parametrize("mode", LOAD_MODES, ids=LOAD_MODE_IDS)
@pytest.mark.parametrize("n", range(10))
def test_standard_file_loads(testdata, n, mode):
    path = testdata / "kastore" / "v1" / f"all_types_{n}_elements.kas"
    data = load_file(mode, path)
    assert sorted(data) == sorted(DTYPE_NAMES)
    assert_same(data, all_types(n))


@pytest.mark.parametrize("n", range(10))
def test_standard_file_rewritten_byte_for_byte(testdata, n):
    raw = (testdata / "kastore" / "v1" / f"all_types_{n}_elements.kas").read_bytes()
    with kastore.loads(raw) as store:
        assert kastore.dumps(store) == raw
        assert kastore.dumps(dict(store)) == raw
    assert kastore.dumps(all_types(n)) == raw


@pytest.mark.parametrize("n", range(10))
def test_standard_file_dump_to_path_byte_for_byte(testdata, tmp_path, n):
    raw = (testdata / "kastore" / "v1" / f"all_types_{n}_elements.kas").read_bytes()
    target = tmp_path / "out.kas"
    kastore.dump(all_types(n), target)
    assert target.read_bytes() == raw


@pytest.mark.parametrize("mode", LOAD_MODES, ids=LOAD_MODE_IDS)
def test_empty_file_is_end_of_file(testdata, mode):
    with pytest.raises(EOFError) as caught:
        load_file(mode, testdata / "kastore" / "malformed" / "empty_file.kas")
    assert isinstance(caught.value, kastore.FileFormatError) and isinstance(caught.value, arrayio.FormatError)


@pytest.mark.parametrize("mode", LOAD_MODES, ids=LOAD_MODE_IDS)
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_file(testdata, name, mode):
    expected = MALFORMED[name]
    with pytest.raises(expected) as caught:
        load_file(mode, testdata / "kastore" / "malformed" / f"{name}.kas")
    error = caught.value
    assert isinstance(error, arrayio.FormatError)
    assert isinstance(error, kastore.KastoreException)
    message = str(error)
    assert "kastore" in message
    assert "at byte" in message
    assert error.field, message
    assert error.offset is not None and error.offset >= 0


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_file_validate_reports_one_problem(testdata, name):
    problems = kastore.validate(testdata / "kastore" / "malformed" / f"{name}.kas")
    assert len(problems) == 1
    assert str(problems[0]).startswith("kastore")
    assert "at byte" in str(problems[0]) and isinstance(problems[0].offset, int) and problems[0].field


def test_version_errors_are_version_errors(testdata):
    folder = testdata / "kastore" / "malformed"
    with pytest.raises(arrayio.errors.VersionTooOldError):
        kastore.load(folder / "version_0.kas")
    with pytest.raises(arrayio.errors.VersionTooNewError):
        kastore.load(folder / "version_100.kas")
