import os

import pytest
import torch

from seedlab.engine.determinism import (
    FULLY_DETERMINISTIC,
    configure_process,
    current_environment,
    current_switches,
    full_determinism,
)
from seedlab.engine.environment import Environment


def test_switches_are_applied_inside_and_restored_after():
    before = current_switches()
    with full_determinism(True) as inside:
        assert inside == FULLY_DETERMINISTIC
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    assert current_switches() == before


def test_switches_are_restored_after_an_error():
    before = current_switches()
    with pytest.raises(RuntimeError), full_determinism(True):
        raise RuntimeError("boom")
    assert current_switches() == before


def test_a_custom_previous_state_survives():
    torch.backends.cudnn.benchmark = True
    try:
        with full_determinism(True):
            assert torch.backends.cudnn.benchmark is False
        assert torch.backends.cudnn.benchmark is True
        with full_determinism(False) as inside:
            assert inside.cudnn_benchmark is True  # off means untouched, not "fast"
    finally:
        torch.backends.cudnn.benchmark = False


def test_environment_records_versions_threads_and_switches_and_lists_differences():
    env = current_environment(torch.device("cpu"), torch.float32, current_switches())
    assert env.torch == torch.__version__ and env.threads == torch.get_num_threads()
    assert env.device.startswith("cpu")
    assert Environment.from_dict(env.to_dict()) == env
    other = Environment.from_dict({**env.to_dict(), "threads": env.threads + 1, "torch": "0.0"})
    assert sorted(d.split(":")[0] for d in env.differences(other)) == ["threads", "torch"]
    assert env.differences(env) == []
    unknown = Environment.from_dict({**env.to_dict(), "cublas_workspace_config": None, "threads": env.threads + 1})
    assert [d.split(":")[0] for d in env.differences(unknown)] == ["threads"]  # unknown parts are no difference


def test_configure_process_sets_the_cublas_workspace_and_pins_threads():
    threads = torch.get_num_threads()
    try:
        configure_process(threads=1)
        assert torch.get_num_threads() == 1
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"]
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="threads"):
        configure_process(threads=0)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("torch"),
        lambda d: d.update(threads="2"),
        lambda d: d.update(extra=1),
        lambda d: d.update(switches=[]),
        lambda d: d["switches"].update(cudnn_benchmark="no"),
        lambda d: d["switches"].pop("matmul_tf32"),
    ],
)
def test_environment_from_untrusted_json_is_checked(change):
    data = current_environment(torch.device("cpu"), torch.float32, current_switches()).to_dict()
    change(data)
    with pytest.raises(ValueError, match="environment"):
        Environment.from_dict(data)
