"""A public Space's hostile ground, through the real app: limits on every path, and cancellation."""

import json
import time

import pytest
import torch
from gradio_client.exceptions import AppError

from seedlab import Recipe, encode_link
from tests.conftest import APP_MAX_STEPS

PROMPT = "a red circle"


@pytest.mark.parametrize(
    ("api_name", "arguments", "named"),
    [
        ("/grid", {"seeds": "0-16"}, "at most 16 images per grid"),
        ("/vary", {"seed": 1, "variations": "\n".join(f", v{i}" for i in range(9))}, "at most 8 variations"),
        ("/grid", {"seeds": "1", "num_inference_steps": APP_MAX_STEPS + 1}, f"at most {APP_MAX_STEPS} on this server"),
        ("/grid", {"seeds": "1", "width": 1032}, "Width must be at most 1024 pixels a side"),
        ("/vary", {"seed": 1, "variations": "x", "height": 2048}, "Height must be at most 1024 pixels a side"),
        ("/grid", {"seeds": "1", "prompt": "x" * 501}, "at most 500 characters on this server"),
        ("/grid", {"seeds": "1", "negative_prompt": "x" * 501}, "at most 500 characters on this server"),
    ],
)
def test_each_limit_is_enforced_on_the_server_with_a_message_naming_it(client, api_name, arguments, named):
    with pytest.raises(AppError, match=named) as refused:
        client.predict(**{"prompt": PROMPT, **arguments}, api_name=api_name)
    assert "SEEDLAB_" not in str(refused.value)  # a visitor reads the limit; the host's setting is in the log
    _, results = client.predict(prompt=PROMPT, seeds="3", num_inference_steps=1, api_name="/grid")
    assert [r["seed"] for r in results] == ["3"]  # still serving


def test_a_request_over_the_compute_budget_is_refused_saying_what_to_reduce(client):
    """Independent caps allow 16 images x 50 steps at 1024x1024: about a day on a CPU. The budget refuses it."""
    with pytest.raises(AppError, match=r"would take about .* on this server: ask for fewer images, fewer steps"):
        client.predict(prompt=PROMPT, seeds="0-15", num_inference_steps=50, width=1024, height=1024, api_name="/grid")


def test_variations_cannot_bypass_the_prompt_limit(client):
    """Each line and the base are short, but the joined prompts are not: every joined prompt is checked."""
    with pytest.raises(AppError, match="Prompt must be at most 500 characters on this server"):
        client.predict(prompt="x" * 400, seed="1", variations=", " + "y" * 200, api_name="/vary")


def test_a_link_cannot_bypass_the_limits(client, app_model):
    recipe = Recipe(prompt="x" * 501, model=app_model)
    link = encode_link(recipe, "0" * 64, None, "http://127.0.0.1/")
    with pytest.raises(AppError, match="Prompt must be at most 500 characters on this server"):
        client.predict(link_or_recipe=link, api_name="/reproduce")


def test_cancelling_a_long_grid_frees_the_server_within_a_few_steps(client):
    job = client.submit(prompt=PROMPT, seeds="0-7", num_inference_steps=APP_MAX_STEPS, api_name="/grid")
    deadline = time.monotonic() + 120
    while not job.status().progress_data and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.status().progress_data, "the long grid never reported progress"
    started = time.monotonic()
    job.cancel()
    _, results = client.predict(prompt=PROMPT, seeds="5", num_inference_steps=1, api_name="/grid")
    waited = time.monotonic() - started
    assert [r["seed"] for r in results] == ["5"]
    # The cancelled grid had 8 x 150 steps left (over a minute here); only a step or two may run on.
    assert waited < 20, f"the next request waited {waited:.1f} s after the cancel"
    print(f"cancel -> next request served in {waited:.2f} s")


def test_queue_size_and_concurrency_come_from_the_host_settings(monkeypatch, tiny_model_dir):
    import gradio as gr

    import app

    served = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: served.append(self))
    monkeypatch.setenv("SEEDLAB_QUEUE_SIZE", "3")
    monkeypatch.setenv("SEEDLAB_CONCURRENCY", "2")
    app.main(["--model", str(tiny_model_dir), "--device", "cpu"])
    (demo,) = served
    assert (demo._queue.max_size, demo._queue.default_concurrency_limit) == (3, 2)
    assert demo._queue.push.__name__ == "push_within_share"  # the per-visitor cap on waiting requests (queue_cap)
    restores = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "restore"]
    assert len(restores) == 1 and restores[0].queue and restores[0].concurrency_id == "history"  # not on the threads
    generating = [fn for fn in demo.fns.values() if fn.api_name in ("grid", "vary", "reproduce")]
    assert len(generating) == 3 and {fn.concurrency_id for fn in generating} == {"generation"}  # one shared limit


def test_a_bad_host_setting_stops_the_app_with_a_message_naming_it(monkeypatch, tiny_model_dir, capsys):
    import app

    monkeypatch.setenv("SEEDLAB_MAX_STEPS", "lots")
    with pytest.raises(SystemExit) as exit_:
        app.main(["--model", str(tiny_model_dir), "--device", "cpu"])
    assert exit_.value.code == 2 and "SEEDLAB_MAX_STEPS must be a positive integer" in capsys.readouterr().err


def test_a_terminated_server_removes_its_png_folder(app_server):
    """SIGTERM (how a Space or a test stops the app) runs the clean-up that atexit registered."""
    before = set(app_server.folder.glob("seedlab-png-*"))
    assert before
    app_server.restart()
    assert not before & set(app_server.folder.glob("seedlab-png-*"))


def raw_grid(app_url: str, fields: dict, prompt: str = "a red circle", seeds: str = "1") -> str:
    """POST /grid as a plain HTTP client would (any JSON at all), and return the event stream's text."""
    import httpx

    from webui.fields import FIELDS

    data = [prompt, seeds, *(fields.get(name) for name in FIELDS)]
    body = json.dumps({"data": data}, allow_nan=True)
    answer = httpx.post(f"{app_url}/gradio_api/call/grid", content=body,
                        headers={"content-type": "application/json"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return httpx.get(f"{app_url}/gradio_api/call/grid/{answer.json()['event_id']}", timeout=120).text


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_inference_steps": float("nan")}, "Steps must be a whole number from 1 to 200, got nan"),
        ({"width": float("inf")}, "Width must be a whole number from 32 to 4096"),
        ({"num_inference_steps": "abc"}, "Steps must be a whole number from 1 to 200, got 'abc'"),
        ({"variation_seed": [1]}, "Variation seed must be a whole number"),
        ({"guidance_scale": 1e308}, "Guidance scale must be a number from 0 to 50"),
    ],
)
def test_any_json_from_a_plain_http_client_gets_a_message_naming_the_field(app_url, fields, message):
    stream = raw_grid(app_url, fields)
    assert "event: error" in stream and message in stream, stream[-400:]


@pytest.mark.parametrize(("where", "message"), [
    ("prompt", "Prompt must be valid Unicode text (it holds a lone surrogate)"),
    ("negative_prompt", "Negative prompt must be valid Unicode text (it holds a lone surrogate)"),
    ("scheduler", "Scheduler must be valid Unicode text (it holds a lone surrogate)"),
    ("seeds", "is not a seed"),
])
def test_a_lone_surrogate_in_raw_json_gets_a_message_naming_the_field(app_url, where, message):
    text = "a \ud800 circle"  # valid JSON ("\ud800"), valid in a Python str, not in UTF-8
    stream = raw_grid(app_url, {where: text} if where not in ("prompt", "seeds") else {},
                      **({where: text} if where in ("prompt", "seeds") else {}))
    assert "event: error" in stream and message in stream and '"error": null' not in stream, stream[-400:]


def test_every_field_left_null_takes_the_models_defaults(app_url):
    assert '"fingerprint"' in raw_grid(app_url, {}).split("event: complete")[-1]


def test_a_model_that_cannot_be_loaded_is_named_once_without_a_stack_trace_nobody_sees(monkeypatch):
    from seedlab.engine.models import load_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError) as error:
        load_model("someone/not-cached-here", torch.device("cpu"))
    message = str(error.value)
    assert message.startswith("model 'someone/not-cached-here' could not be loaded: ")
    assert message.count("not-cached-here") == 1 and "stacktrace" not in message


def test_a_visitor_with_too_many_requests_waiting_is_refused_the_next_one_and_others_are_not():
    """One visitor's 33 POSTs filled Gradio's whole queue (everyone else got HTTP 503)."""
    import asyncio
    from types import SimpleNamespace

    from webui.queue_cap import cap_queued

    group = SimpleNamespace(queue=[])

    async def push(body, request, username):  # Gradio's Queue.push: the request waits in its group
        group.queue.append(SimpleNamespace(request=request))
        return True, "event", "success"

    demo = SimpleNamespace(_queue=SimpleNamespace(event_queue_per_concurrency_id={"generation": group}, push=push))
    cap_queued(demo, 2)

    def join(host: str, headers: dict | None = None) -> tuple:
        request = SimpleNamespace(client=SimpleNamespace(host=host), headers=headers or {})
        return asyncio.run(demo._queue.push(None, request, None))

    assert [join("203.0.113.9")[2] for _ in range(2)] == ["success", "success"]
    refused = join("203.0.113.9", {"x-forwarded-for": "10.9.9.9"})  # a header of its own changes nothing
    assert refused[:3:2] == (False, "error") and "each visitor may have 2 in the queue" in refused[1]
    assert join("198.51.100.7")[2] == "success"  # another visitor is not held up
    group.queue.pop(0)  # one of the first visitor's requests starts running: room for one more
    assert join("203.0.113.9")[2] == "success"
