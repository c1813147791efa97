"""The same tasks as the worker pool, on a Ray cluster: one actor per worker, the model loaded once each.

Ray is imported only here, when asked for. An actor pins its torch thread count and reserves that
many CPUs from Ray, so the cluster never packs more threads onto a node than it has cores. Before
any image is made, every actor reports the versions it runs; a node with another seedlab, diffusers
or torch would make other pixels, so it is refused instead of silently mixed in.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..engine import cpu
from ..engine.generation import Cancelled
from ..engine.recipe import Recipe
from ..engine.version import __version__
from .pool import Done, Failed, WorkerModel, model_info, one_line, run_task

IN_FLIGHT_PER_ACTOR = 2  # the next task waits in the actor's queue, so no round trip between images
CONNECT_TIMEOUT_S = 10
RETRIES = 2  # times a task is tried again after its actor died


class RayWorker:
    """A Ray actor's state: the loaded model. Wrapped with ray.remote by RayPool."""

    def __init__(self, model_name: str, device: str, dtype: str, threads: int, cpu_isa: str):
        from ..engine import determinism, models

        determinism.configure_process(threads, cpu_isa)  # the driver's CPU baseline, before torch computes
        self.model = models.load_model(model_name, models.resolve_device(device), dtype)

    def info(self) -> tuple[WorkerModel, dict[str, str]]:
        return model_info(self.model), versions()

    def run(self, index: int, recipe: Recipe, threads: int) -> Done | Failed:
        return run_task(self.model, index, recipe, threads)


def versions() -> dict[str, str]:
    """The versions that decide the pixels, beside the thread count (and the CPU kernels, see cpu.py)."""
    import diffusers
    import torch

    found = {"seedlab": __version__, "diffusers": diffusers.__version__, "torch": str(torch.__version__),
             "cpu kernels": cpu.in_force()}
    if found["cpu kernels"] != "portable":  # MKL rounds differently on Intel and AMD unless portable
        found["cpu vendor"] = cpu.vendor()
    return found


class RayPool:
    """Actors on a Ray cluster, with the worker pool's interface (model_info, map, cancel, close).

    `address` None starts a local Ray instance with `workers * threads` CPUs; otherwise it joins the
    cluster at `address` ("auto", "ray://head:10001", "head:6379"). `workers` None means as many
    actors as the cluster's CPUs allow at `threads` each.
    """

    def __init__(self, model: str, *, workers: int | None, threads: int = 1, address: str | None = None,
                 device: str = "cpu", dtype: str = "float32"):
        import ray

        self.model, self.threads = model, threads
        self._ray = ray
        level = cpu.requested()  # the actors take the driver's CPU baseline (set before their torch computes)
        settings = {cpu.ENV_VAR: level, **cpu.BASELINES[level]}
        self._started = False
        if not ray.is_initialized():
            options = {"logging_level": logging.ERROR, "log_to_driver": False}
            if address is None:  # a local instance: its workers import this very seedlab, wherever it lies
                options["runtime_env"] = {"env_vars": {"PYTHONPATH": _python_path(), **settings}}
                ray.init(num_cpus=workers * threads if workers else None, include_dashboard=False, **options)
            else:
                _check_reachable(address)  # Ray itself retries an address that never answers for minutes
                try:
                    ray.init(address=address, runtime_env={"env_vars": settings}, **options)
                except (ConnectionError, ValueError, RuntimeError) as error:
                    raise ValueError(f"--ray could not join the cluster at {address!r}: {one_line(error)}") from None
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 0))
        count = workers or max(1, cpus // threads)
        if count * threads > cpus:
            self.close()
            raise ValueError(f"workers: {count} workers x {threads} threads need {count * threads} CPUs, "
                             f"the Ray cluster has {cpus}")
        # A lost actor (a killed process, a lost node) restarts, reloading the model; its tasks are retried on it,
        # a few times only: a recipe that kills every worker that tries it must end as a failure.
        actor = ray.remote(RayWorker).options(num_cpus=threads, max_restarts=-1, max_task_retries=RETRIES)
        self._actors = [actor.remote(model, device, dtype, threads, level) for _ in range(count)]
        self._info: WorkerModel | None = None
        self._cancelled = False

    @property
    def size(self) -> int:
        """How many actors make images at once."""
        return len(self._actors)

    def model_info(self) -> WorkerModel:
        """The loaded model's defaults, once every actor has loaded it and runs our versions."""
        if self._info is None:
            ours = versions()
            try:
                answers = self._ray.get([actor.info.remote() for actor in self._actors])
            except self._ray.exceptions.RayError as error:
                raise ValueError(f"the Ray workers could not load model {self.model!r}: {_cause(error)}") from None
            for _info, theirs in answers:
                if theirs != ours:
                    differ = ", ".join(f"{k} {theirs.get(k)} there, {ours.get(k)} here" for k in {**ours, **theirs}
                                       if theirs.get(k) != ours.get(k))
                    hint = " (or --cpu-isa portable for Intel and AMD nodes together)" if "cpu vendor" in differ else ""
                    raise ValueError(f"a Ray worker runs other versions ({differ}): give every node the same image"
                                     f"{hint}")
            self._info = answers[0][0]
        return self._info

    def map(self, recipes: Iterable[Recipe], *, ordered: bool = False,
            threads: int | None = None) -> Iterator[Done | Failed]:
        """Generate every recipe on the actors, yielding a Done or a Failed for each."""
        ray, threads = self._ray, self.threads if threads is None else threads
        self._cancelled = False
        tasks, exhausted = enumerate(recipes), False
        in_flight: dict = {}  # object ref -> (actor, index, recipe)
        load = {id(actor): 0 for actor in self._actors}
        waiting: dict[int, Done | Failed] = {}
        next_index = 0
        try:
            while True:
                for actor in self._actors:
                    while load[id(actor)] < IN_FLIGHT_PER_ACTOR and not exhausted and not self._cancelled:
                        task = next(tasks, None)
                        if task is None:
                            exhausted = True
                            break
                        index, recipe = task
                        if recipe.model != self.model:
                            raise ValueError(f"model {recipe.model!r} was asked for; this pool serves {self.model!r}")
                        in_flight[actor.run.remote(index, recipe, threads)] = (actor, index, recipe)
                        load[id(actor)] += 1
                if not in_flight:
                    if self._cancelled:
                        raise Cancelled("generation cancelled")
                    return
                finished, _ = ray.wait(list(in_flight), num_returns=1)
                actor, index, recipe = in_flight.pop(finished[0])
                load[id(actor)] -= 1
                try:
                    item = ray.get(finished[0])
                except ray.exceptions.RayError as error:  # the actor died (a lost node): Ray restarts it
                    item = Failed(index, recipe, f"the Ray worker failed: {_cause(error)}")
                if not ordered:
                    yield item
                    continue
                waiting[item.index] = item
                while next_index in waiting:
                    yield waiting.pop(next_index)
                    next_index += 1
        finally:
            for ref in in_flight:  # queued tasks are dropped; a running one finishes on its own
                ray.cancel(ref)

    def cancel(self) -> None:
        """Stop handing out tasks; the ones already running finish."""
        self._cancelled = True

    def close(self) -> None:
        """Free the actors, and stop the local Ray instance if this pool started it."""
        for actor in getattr(self, "_actors", []):
            self._ray.kill(actor)
        self._actors = []
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _check_reachable(address: str) -> None:
    """Refuse at once a cluster address ("host:port", "ray://host:port") where nothing listens."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray must be auto, HOST:PORT or ray://HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise ValueError(f"--ray: nothing answers at {address} ({error.strerror or error})") from None


def _python_path() -> str:
    """PYTHONPATH for local Ray workers: the folder that holds this seedlab package, then the caller's."""
    here = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])


def _cause(error: Exception) -> str:
    """The first line that says what went wrong, without Ray's traceback framing."""
    cause = getattr(error, "cause", None)
    return one_line(cause) if isinstance(cause, BaseException) else one_line(error)
