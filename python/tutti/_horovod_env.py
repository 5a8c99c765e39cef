"""Horovod's environment variables, read by every binding's init(): those tutti has a
counterpart for become that TUTTI_ variable (one already set wins; units agree), and switches
tutti has no counterpart for are refused when set to anything but Horovod's default, rather than
run differently from what the script asked for."""
import os

from .errors import UnsupportedError

# Horovod's environment variables that tutti reads, as the TUTTI_ ones they stand for (a TUTTI_
# variable that is set wins). Units agree (bytes, milliseconds, seconds).
_HOROVOD_ENV = {"HOROVOD_FUSION_THRESHOLD": "TUTTI_FUSION_THRESHOLD",
                "HOROVOD_CYCLE_TIME": "TUTTI_CYCLE_TIME_MS",
                "HOROVOD_CACHE_CAPACITY": "TUTTI_CACHE_CAPACITY",
                "HOROVOD_TIMELINE": "TUTTI_TIMELINE",
                "HOROVOD_STALL_CHECK_TIME_SECONDS": "TUTTI_STALL_WARNING_SECONDS",
                "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "TUTTI_STALL_SHUTDOWN_SECONDS",
                "HOROVOD_LOG_LEVEL": "TUTTI_LOG_LEVEL",
                # Every set of the job tuned, each on its own (docs/autotune.md); the trials
                # as CSV, one row per trial and set (columns of tutti's own).
                "HOROVOD_AUTOTUNE": "TUTTI_AUTOTUNE",
                "HOROVOD_AUTOTUNE_LOG": "TUTTI_AUTOTUNE_LOG"}
# One setting chooses the hierarchy of every collective, job-wide (where Horovod has one per kind).
_HIERARCHY = ("tutti's TUTTI_HIERARCHICAL (auto, the default, 0 or 1) chooses the hierarchical "
              "algorithms of every collective at once (docs/algorithms.md)")
# Horovod's Bayesian optimiser's knobs: tutti's tuner is another search, whose trial lengths are
# tuttid's (docs/autotune.md).
_TRIAL_LENGTHS = ("tuttid sets the autotuner's trial lengths (--autotune-trial-tensors, "
                  "--autotune-trial-ms, --autotune-warmup-tensors; docs/autotune.md)")
_NOT_BAYESIAN = ("tutti's autotuner is a coordinate search with a confirmation round, not "
                 "Bayesian optimisation (docs/autotune.md)")
# Horovod switches tutti has no counterpart for, with Horovod's default: set to anything else,
# init refuses them rather than run differently from what the script asked for.
_HOROVOD_REFUSED = {
    "HOROVOD_TIMELINE_MARK_CYCLES": ("0", "tutti's timeline has no cycle markers"),
    "HOROVOD_HIERARCHICAL_ALLREDUCE": ("0", _HIERARCHY),
    "HOROVOD_HIERARCHICAL_ALLGATHER": ("0", _HIERARCHY),
    "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": ("3", _TRIAL_LENGTHS),
    "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": ("10", _TRIAL_LENGTHS),
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": ("20", _NOT_BAYESIAN),
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": ("0.8", _NOT_BAYESIAN),
}

def read():
    """Called by every binding's init() before it joins (tutti.torch, and tutti.tensorflow,
    .keras, .jax and .mxnet through tutti._process_sets.init)."""
    for horovod, tutti_name in _HOROVOD_ENV.items():
        value = os.environ.get(horovod)
        if value is None or tutti_name in os.environ:
            continue
        if horovod == "HOROVOD_STALL_CHECK_TIME_SECONDS" and \
                os.environ.get("HOROVOD_STALL_CHECK_DISABLE", "0") not in ("", "0"):
            continue
        os.environ[tutti_name] = value
    if os.environ.get("HOROVOD_STALL_CHECK_DISABLE", "0") not in ("", "0") and \
            "TUTTI_STALL_WARNING_SECONDS" not in os.environ:
        os.environ["TUTTI_STALL_WARNING_SECONDS"] = "0"  # 0: off
    for name, (default, why) in _HOROVOD_REFUSED.items():
        value = os.environ.get(name)
        if value not in (None, "", default):
            raise UnsupportedError(f"{name}={value} is not supported: {why}")
