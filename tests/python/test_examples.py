"""Runs the training examples of examples/python/ as real tutti jobs: each must exit 0, its
reported loss must go down on every rank that reports one, and it must print its own check."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, job_env, lines_of, run_job

EXAMPLES = os.path.join(ROOT, "examples", "python")
FINAL = re.compile(r"^final loss ([0-9.]+) \(first ([0-9.]+)\)$")


def run_example(np, script, *args):
    result = run_job(np, os.path.join(EXAMPLES, script), *args)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def final_losses(result, np):
    """{rank: (final, first)} for the ranks that print a final loss."""
    losses = {}
    for rank in range(np):
        for line in lines_of(result, rank):
            match = FINAL.match(line)
            if match:
                losses[rank] = (float(match.group(1)), float(match.group(2)))
    return losses


def check(result, np, reporters, verdict):
    losses = final_losses(result, np)
    assert sorted(losses) == sorted(reporters), result.stdout
    for rank, (final, first) in losses.items():
        assert final < first, f"rank {rank}: loss went from {first} to {final}\n{result.stdout}"
    assert verdict in lines_of(result, 0), result.stdout


@pytest.mark.parametrize("np", [2, 4])
def test_data_parallel(np):
    check(run_example(np, "data_parallel.py"), np, [0], "replicas identical")


def test_two_models():
    # Two sets of two ranks: the even set's leader (0) and the odd set's (1) each report.
    check(run_example(4, "two_models.py"), 4, [0, 1], "sets independent")


@pytest.mark.parametrize("np", [2, 4])
def test_pipeline(np):
    # The loss is known on the backend only; its first rank (np / 2) reports it.
    check(run_example(np, "pipeline.py"), np, [np // 2], "stages consistent")


@pytest.mark.parametrize("np", [2, 4])
def test_even_odd_losses(np):
    result = run_example(np, "even_odd_losses.py")
    check(result, np, [0, 1], "set losses consistent")
    # Same model, different data: the two sets report different losses (the odd ranks' labels
    # are noisy), both lower at the end.
    losses = final_losses(result, np)
    assert losses[1][0] > losses[0][0], result.stdout


def test_elastic_process_sets():
    # An elastic job (tuttirun --min-np 2): rank 3 of the odd set dies with SIGKILL in epoch 2;
    # the odd set restores and finishes alone, the even set never restores.
    command = [os.path.join(BUILD, "tuttirun"), "-np", "4", "--min-np", "2", sys.executable,
               os.path.join(EXAMPLES, "elastic_process_sets.py")]
    result = subprocess.run(command, env=job_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    check(result, 4, [0, 1], "sets survived")
    assert any(line.startswith("even set final loss ") and ", restored 0 times," in line
               for line in lines_of(result, 0)), result.stdout
    assert any(line.startswith("odd set final loss ") and ", restored 1 times," in line
               for line in lines_of(result, 1)), result.stdout
    assert "rank 3 was killed by signal 9; the elastic job goes on without it" in result.stderr
