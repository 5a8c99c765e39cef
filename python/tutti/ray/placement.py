"""The ranks' placement group and actors (driver side; they live from start() to shutdown()).

One bundle per rank ({"CPU": cpus_per_worker, "GPU": gpus_per_worker}), PACK as horovod.ray's
PGStrategy (ranks on as few nodes as fit: shared memory among them), all placed or none: start()
gives up with TimeoutError if Ray cannot place the whole group in time, and removes it. Actors
are never restarted by Ray (max_restarts=0): a second copy of a rank must not join a live job
behind the driver's back (ElasticRayExecutor starts a replacement itself, as an added rank)."""
import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from .worker import TuttiWorker


def resources_per_worker(cpus_per_worker, gpus_per_worker):
    bundle = {"CPU": cpus_per_worker}
    if gpus_per_worker:
        bundle["GPU"] = gpus_per_worker
    return bundle


def create_placement_group(num_workers, bundle, timeout_s):
    group = ray.util.placement_group([dict(bundle) for _ in range(num_workers)], strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(group)
        raise TimeoutError(
            f"Ray could not place the placement group of {num_workers} workers ({bundle} each) "
            f"within {timeout_s:g} s (placement_group_timeout_s); available now: "
            f"{ray.available_resources()}, in the whole cluster: {ray.cluster_resources()}")
    return group


def create_workers(group, bundle, envs):
    """One actor per rank in its bundle; envs[rank] is its environment."""
    return [create_worker(group, bundle, rank, env) for rank, env in enumerate(envs)]


def create_worker(group, bundle, rank, env):
    """The actor of `rank` in the group's bundle `rank` (free again once an earlier actor of
    that rank died: ElasticRayExecutor replaces a lost rank there)."""
    return ray.remote(TuttiWorker).options(
        num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), max_restarts=0,
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=rank,
            placement_group_capture_child_tasks=False),
    ).remote(rank, env)


def local_ranks(nodes):
    """horovodrun's HOROVOD_LOCAL_RANK/_SIZE and HOROVOD_CROSS_RANK/_SIZE per rank, from each
    rank's Ray node id (a node is one host): {rank: {name: value}}."""
    by_node = {}
    for rank, node in enumerate(nodes):
        by_node.setdefault(node, []).append(rank)
    cross_size, cross_rank, local = {}, {}, {}
    for ranks in by_node.values():
        for local_rank, rank in enumerate(ranks):
            cross_rank[rank] = cross_size.get(local_rank, 0)
            cross_size[local_rank] = cross_rank[rank] + 1
            local[rank] = (local_rank, len(ranks))
    return {rank: {"HOROVOD_LOCAL_RANK": local[rank][0], "HOROVOD_LOCAL_SIZE": local[rank][1],
                   "HOROVOD_CROSS_RANK": cross_rank[rank],
                   "HOROVOD_CROSS_SIZE": cross_size[local[rank][0]]}
            for rank in range(len(nodes))}
