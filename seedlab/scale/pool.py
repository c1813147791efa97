"""The worker pool: images generated in parallel processes, each with a pinned torch thread count.

On a CPU one small image uses the cores badly through torch's intra-op threads (16x16 latents
give them little to split), so N images in N processes of one thread each finish sooner than N
images one after another. The thread count changes low bits, so each worker pins it and every
image records it in its environment.

Each worker is a spawned process that loads the model once, then runs one task at a time with the
existing `generation.generate`. The parent hands a worker its next task only when it is idle, so
it always knows which recipe a worker holds: a worker that dies fails exactly that recipe, a fresh
worker takes its place, and every other result arrives intact.

    with Pool("embedded", workers=2, threads=1) as pool:
        for item in pool.map(recipes):       # Done or Failed, in completion order
            ...
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch
from PIL import Image

from ..engine.determinism import Environment
from ..engine.generation import Cancelled, Progress, ProgressFn, Result, generate
from ..engine.recipe import Recipe

STOP_TIMEOUT_S = 10  # how long close() lets a worker finish its image before terminating it


@dataclass(frozen=True)
class Done:
    """A finished image as a worker sends it back: the raw pixels, cheap to turn into a Result."""

    index: int  # position of the recipe in what was given to `map`
    recipe: Recipe
    pixels: np.ndarray  # (height, width, 3) uint8, the array the fingerprint was taken of
    fingerprint: str
    environment: Environment

    def result(self) -> Result:
        """The generation.Result this image would have had in-process."""
        return Result(self.recipe, Image.fromarray(self.pixels), self.fingerprint, self.environment)


@dataclass(frozen=True)
class Failed:
    """A recipe that produced no image: the one-line reason (its error, or its worker died)."""

    index: int
    recipe: Recipe
    error: str


@dataclass(frozen=True)
class WorkerModel:
    """What a caller needs to complete recipes before the first image: the loaded model's defaults."""

    name: str
    native_size: tuple[int, int]
    default_guidance: float
    schedulers: tuple[str, ...]


def model_info(model) -> WorkerModel:
    """Describe a loaded `models.Model`."""
    return WorkerModel(model.name, model.native_size, model.default_guidance, tuple(model.schedulers))


def run_task(model, index: int, recipe: Recipe, threads: int, *, progress: ProgressFn | None = None,
             cancel: Any = None) -> Done | Failed:
    """One task inside a worker (a process or a Ray actor): `generate` at a pinned thread count."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    try:
        if recipe.model != model.name:
            raise ValueError(f"model {recipe.model!r} was asked for, but this worker serves {model.name!r}")
        result = generate(model, recipe, progress=progress, cancel=cancel)
    except Cancelled:
        return Failed(index, recipe, "cancelled")
    except Exception as error:  # noqa: BLE001 - reported for this recipe; the worker carries on
        return Failed(index, recipe, one_line(error))
    return Done(index, result.recipe, np.asarray(result.image), result.fingerprint, result.environment)


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _work(conn: Connection, cancel, model_name: str, device: str, dtype: str, threads: int,
          cpu_isa: str | None = None) -> None:
    """A worker process: load the model once, then run tasks until told to stop or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's to handle; it stops us
    from ..engine import determinism, models

    try:
        determinism.configure_process(threads, cpu_isa)  # None: the parent's baseline, inherited
        model = models.load_model(model_name, models.resolve_device(device), dtype)
    except Exception as error:  # noqa: BLE001 - a bad model name or folder: the parent reports it
        conn.send(("error", one_line(error)))
        return
    conn.send(("ready", model_info(model)))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if task is None:
            return
        index, recipe, task_threads, report_steps = task
        progress = (lambda done, total, index=index: conn.send(("step", index))) if report_steps else None
        conn.send(run_task(model, index, recipe, task_threads, progress=progress, cancel=cancel))


@dataclass(eq=False)
class _Worker:
    process: Any
    conn: Connection
    cancel: Any  # a multiprocessing.Event: generate() checks it at every step
    ready: bool = False
    task: tuple[int, Recipe] | None = field(default=None)


class Pool:
    """Worker processes that each hold the model and generate one image at a time.

    One `map` runs at a time (others wait for it); `cancel()` may be called from any thread.
    """

    def __init__(self, model: str, *, workers: int, threads: int = 1, device: str = "cpu", dtype: str = "float32",
                 cpu_isa: str | None = None):
        for name, value in (("workers", workers), ("threads", threads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.model, self.threads = model, threads
        self._spec = (model, device, dtype, threads, cpu_isa)  # cpu_isa: another CPU baseline than ours
        self._context = multiprocessing.get_context("spawn")  # fork would copy torch's thread pools
        self._info: WorkerModel | None = None
        self._error: Exception | None = None  # the model cannot load: every later call fails the same way
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        parent, child = self._context.Pipe()
        cancel = self._context.Event()
        process = self._context.Process(target=_work, args=(child, cancel, *self._spec), daemon=True,
                                        name="seedlab-worker")
        process.start()
        child.close()
        return _Worker(process, parent, cancel)

    @property
    def size(self) -> int:
        """How many workers make images at once."""
        return len(self._workers)

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (to watch their memory, say)."""
        return [worker.process.pid for worker in self._workers]

    def model_info(self) -> WorkerModel:
        """The loaded model's name and defaults, waiting for the first worker to load it."""
        with self._lock:
            while self._info is None:
                for _ in self._receive():
                    pass
            return self._info

    def map(self, recipes: Iterable[Recipe], *, ordered: bool = False, threads: int | None = None,
            progress: bool = False) -> Iterator[Done | Failed | Progress]:
        """Generate every recipe, yielding a Done or a Failed for each (in input order if `ordered`).

        Recipes are taken from `recipes` only as workers become free, so it may be a long lazy
        iterator. `threads` overrides the pool's thread count for these images. With `progress`, a
        generation.Progress (steps done, steps in all) comes after every step, as `stream` gives it.
        Closing the iterator early stops the images in flight within a step; `cancel()` does the
        same and makes the iterator raise generation.Cancelled.
        """
        threads = self.threads if threads is None else threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        if progress:
            recipes = list(recipes)
            total, done_steps = sum(r.num_inference_steps for r in recipes), 0
        with self._lock:
            self._cancelled.clear()
            for worker in self._workers:  # a cancel() between maps must not stop this one
                worker.cancel.clear()
            tasks, exhausted = enumerate(recipes), False
            waiting: dict[int, Done | Failed] = {}  # finished out of order, when `ordered`
            next_index = 0
            try:
                while True:
                    for worker in self._workers:  # one task per idle worker
                        if worker.task is None and not exhausted and not self._cancelled.is_set():
                            task = next(tasks, None)
                            if task is None:
                                exhausted = True
                            else:
                                self._send(worker, task, threads, progress)
                    if not any(worker.task for worker in self._workers):
                        if self._cancelled.is_set():
                            raise Cancelled("generation cancelled")
                        if exhausted:
                            return
                    for item in self._receive():
                        if item == "step":
                            done_steps += 1
                            yield Progress(done_steps, total)
                        elif not ordered:
                            yield item
                        else:
                            waiting[item.index] = item
                            while next_index in waiting:
                                yield waiting.pop(next_index)
                                next_index += 1
            finally:
                self._stop_in_flight()

    def cancel(self) -> None:
        """Stop the current `map`: no new images start, the ones in flight stop at their next step."""
        self._cancelled.set()
        for worker in self._workers:
            worker.cancel.set()

    def close(self) -> None:
        """Stop the workers (each finishes or abandons its image) and free their memory."""
        self.cancel()
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        for worker in self._workers:
            worker.process.join(STOP_TIMEOUT_S)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join()
            worker.conn.close()
        self._workers = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _send(self, worker: _Worker, task: tuple[int, Recipe], threads: int, report_steps: bool) -> None:
        index, recipe = task
        if recipe.model != self.model:
            raise ValueError(f"model {recipe.model!r} was asked for, but this pool serves {self.model!r}")
        worker.task = task
        # an OSError: it died since its last message: _receive sees the death and fails this task
        with contextlib.suppress(OSError):
            worker.conn.send((index, recipe, threads, report_steps))

    def _receive(self) -> Iterator[Done | Failed | str]:
        """Wait for workers to speak; yield results and "step", replace dead workers."""
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if not self._workers:
            raise RuntimeError("the pool is closed")
        objects = [w.conn for w in self._workers] + [w.process.sentinel for w in self._workers]
        ready = wait(objects)
        for position, worker in enumerate(list(self._workers)):
            if worker.conn not in ready and worker.process.sentinel not in ready:
                continue
            try:
                while worker.conn.poll():
                    yield from self._handle(worker, worker.conn.recv())
            except (EOFError, OSError):
                pass
            else:
                if worker.process.sentinel not in ready:
                    continue
            yield from self._replace(position, worker)

    def _handle(self, worker: _Worker, message: Any) -> Iterator[Done | Failed | str]:
        if isinstance(message, (Done, Failed)):
            worker.task = None
            if not (self._cancelled.is_set() and isinstance(message, Failed) and message.error == "cancelled"):
                yield message
        elif message[0] == "step":
            yield "step"
        elif message[0] == "ready":
            worker.ready = True
            self._info = self._info or message[1]
        elif message[0] == "error":  # the model cannot load: every worker would fail the same way
            self._error = ValueError(message[1])
            raise ValueError(message[1])

    def _replace(self, position: int, worker: _Worker) -> Iterator[Failed]:
        """A worker died: fail the recipe it held (if any) and start a fresh one in its place."""
        worker.process.join(STOP_TIMEOUT_S)
        code = worker.process.exitcode
        worker.conn.close()
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if not worker.ready and self._info is None:
            self._error = RuntimeError(f"a worker process died while loading model {self.model!r} (exit code {code})")
            raise RuntimeError(str(self._error))
        self._workers[position] = self._start()
        if worker.task is not None:
            index, recipe = worker.task
            yield Failed(index, recipe, f"the worker process died (exit code {code})")

    def _stop_in_flight(self) -> None:
        """After a map: stop the images still running and wait until every worker is idle again."""
        busy = [worker for worker in self._workers if worker.task is not None]
        for worker in busy:
            worker.cancel.set()
        try:
            while any(worker.task is not None for worker in self._workers):
                for _ in self._receive():  # results of a map that was left are dropped
                    pass
        except (ValueError, RuntimeError):
            for worker in self._workers:
                worker.task = None
        for worker in self._workers:
            worker.cancel.clear()
