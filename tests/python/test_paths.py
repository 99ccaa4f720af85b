"""convtune._paths: the installed package's data and the CONVTUNE_SHAPES_DIR and
CONVTUNE_RECORDINGS_DIR defaults it sets
(the wheel as a whole is tested by tests/wheel/smoke.py, scripts/test-wheel)."""

import os

import pytest

from convtune import _paths


@pytest.fixture
def package_with_data(tmp_path, monkeypatch):
    """_paths as in an installed package: a data/shapes/benchdnn folder beside it."""
    shapes = tmp_path / "data" / "shapes" / "benchdnn"
    shapes.mkdir(parents=True)
    monkeypatch.setattr(_paths, "SHAPES_DIR", str(shapes))
    monkeypatch.setattr(_paths, "RECORDINGS_DIR", str(tmp_path / "missing"))
    return str(shapes)


def test_the_recording_library_is_pointed_at_too(tmp_path, monkeypatch):
    recordings = tmp_path / "data" / "recordings"
    recordings.mkdir(parents=True)
    monkeypatch.setattr(_paths, "SHAPES_DIR", str(tmp_path / "missing"))
    monkeypatch.setattr(_paths, "RECORDINGS_DIR", str(recordings))
    for env in ({}, {"CONVTUNE_RECORDINGS_DIR": ""}):
        _paths.set_default_env(env)
        assert env == {"CONVTUNE_RECORDINGS_DIR": str(recordings)}
    env = {"CONVTUNE_RECORDINGS_DIR": "/somewhere/else"}
    _paths.set_default_env(env)
    assert env == {"CONVTUNE_RECORDINGS_DIR": "/somewhere/else"}


def test_unset_or_empty_points_at_the_package(package_with_data):
    for env in ({}, {"CONVTUNE_SHAPES_DIR": ""}):
        _paths.set_default_env(env)
        assert env["CONVTUNE_SHAPES_DIR"] == package_with_data


def test_a_value_the_user_set_is_kept(package_with_data):
    env = {"CONVTUNE_SHAPES_DIR": "/somewhere/else"}
    _paths.set_default_env(env)
    assert env == {"CONVTUNE_SHAPES_DIR": "/somewhere/else"}


def test_without_shipped_data_nothing_is_set(tmp_path, monkeypatch):
    # The build tree's package (what this suite imports) has no data folder.
    monkeypatch.setattr(_paths, "SHAPES_DIR", str(tmp_path / "missing"))
    monkeypatch.setattr(_paths, "RECORDINGS_DIR", str(tmp_path / "missing"))
    env = {}
    _paths.set_default_env(env)
    assert env == {}


def test_the_build_tree_package_changes_nothing():
    assert not os.path.isdir(_paths.DATA_DIR), "the build tree's package should not carry data/"
    assert os.environ.get("CONVTUNE_SHAPES_DIR", "") != _paths.SHAPES_DIR


def test_exec_cli_without_a_binary_says_where_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(_paths, "CLI", str(tmp_path / "bin" / "convtune"))
    with pytest.raises(SystemExit) as e:
        _paths.exec_cli(["convtune", "list"])
    assert "no CLI binary" in str(e.value) and "cmake --install" in str(e.value)
