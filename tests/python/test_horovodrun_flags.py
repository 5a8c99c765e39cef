"""horovodrun's tuning flags on tuttirun (docs/launcher.md, "horovodrun's flags"): each one tutti
has a counterpart for reaches every rank as that TUTTI_ variable (an explicit -x still wins);
each one it has none for stops tuttirun with status 2 and says what to use instead."""
import os
import subprocess

import pytest

from conftest import BUILD

TUTTIRUN = os.path.join(BUILD, "tuttirun")
NO_COORDINATOR = ["--coordinator", "tcp://127.0.0.1:1"]  # the rank programs never call it
SHOW = ["sh", "-c", 'echo "$TUTTI_FUSION_THRESHOLD|$TUTTI_CYCLE_TIME_MS|$TUTTI_CACHE_CAPACITY|'
                    '$TUTTI_TIMELINE|$TUTTI_AUTOTUNE|$TUTTI_AUTOTUNE_LOG|'
                    '$TUTTI_STALL_WARNING_SECONDS|$TUTTI_STALL_SHUTDOWN_SECONDS"']


def tuttirun(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUTTI_", "HOROVOD_"))}
    return subprocess.run([TUTTIRUN, *args], env=env, capture_output=True, text=True, timeout=120)


def test_the_flags_tutti_has_become_its_variables_on_every_rank():
    result = tuttirun("-np", "2", *NO_COORDINATOR, "--fusion-threshold-mb", "64",
                      "--cycle-time-ms", "2.5", "--cache-capacity", "512",
                      "--timeline-filename", "/tmp/t.json", "--autotune",
                      "--autotune-log-file", "/tmp/trials.csv",
                      "--stall-check-warning-time-seconds", "30",
                      "--stall-check-shutdown-time-seconds", "120", *SHOW)
    assert result.returncode == 0, result.stderr
    expected = "67108864|2.5|512|/tmp/t.json|1|/tmp/trials.csv|30|120"
    assert sorted(result.stdout.splitlines()) == [f"[0] {expected}", f"[1] {expected}"]


def test_no_stall_check_turns_the_warning_off_and_an_explicit_x_wins():
    result = tuttirun("-np", "1", *NO_COORDINATOR, "--no-stall-check", "--fusion-threshold-mb",
                      "1", "-x", "TUTTI_FUSION_THRESHOLD=7", *SHOW)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[0] 7||||||0|"]


def test_horovods_defaults_of_the_flags_tutti_lacks_pass():
    result = tuttirun("-np", "1", *NO_COORDINATOR, "--autotune-warmup-samples", "3",
                      "--autotune-steps-per-sample", "10", "--autotune-bayes-opt-max-samples",
                      "20", "--autotune-gaussian-process-noise", "0.8", "--no-autotune",
                      "--stall-check", "true")
    assert result.returncode == 0, result.stderr


TRIALS = ("tuttid sets the autotuner's trial lengths (tuttid --autotune-trial-tensors, "
          "--autotune-trial-ms, --autotune-warmup-tensors; docs/autotune.md)")
NOT_BAYESIAN = ("tutti's autotuner is a coordinate search with a confirmation round, not "
                "Bayesian optimisation (docs/autotune.md)")
HIERARCHY = ("tutti chooses the hierarchical algorithms of every collective at once: give -x "
             "TUTTI_HIERARCHICAL=1 (or 0; the default, auto, picks them where the hosts are "
             "even; docs/algorithms.md)")


@pytest.mark.parametrize("flags,problem", [
    (["--hierarchical-allreduce"], f"--hierarchical-allreduce is not supported: {HIERARCHY}"),
    (["--no-hierarchical-allgather"],
     f"--no-hierarchical-allgather is not supported: {HIERARCHY}"),
    (["--timeline-mark-cycles"],
     "--timeline-mark-cycles is not supported: tutti's timeline has no cycle markers"),
    (["--autotune-warmup-samples", "5"],
     f"--autotune-warmup-samples 5 is not supported: {TRIALS}"),
    (["--autotune-steps-per-sample", "4"],
     f"--autotune-steps-per-sample 4 is not supported: {TRIALS}"),
    (["--autotune-bayes-opt-max-samples", "40"],
     f"--autotune-bayes-opt-max-samples 40 is not supported: {NOT_BAYESIAN}"),
    (["--autotune-gaussian-process-noise", "0.5"],
     f"--autotune-gaussian-process-noise 0.5 is not supported: {NOT_BAYESIAN}"),
    (["--no-stall-check", "--stall-check-warning-time-seconds", "5"],
     "--no-stall-check and --stall-check-warning-time-seconds are alternatives: give one"),
])
def test_a_flag_tutti_lacks_is_refused_with_what_to_use_instead(flags, problem):
    result = tuttirun("-np", "1", *NO_COORDINATOR, *flags, "true")
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"tuttirun: {problem}\nRun with --help for more information.\n"
    assert result.stdout == ""
