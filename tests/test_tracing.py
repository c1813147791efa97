"""Traced UNet calls: bit-identical to eager ones, one trace per input signature, eager where a trace cannot stand."""

import dataclasses

import numpy as np
import torch

import seedlab
import seedlab.engine.tracing
from seedlab import Recipe
from seedlab.engine.tracing import TracedUNet


def inputs(unet, batch: int, side: int, timestep):
    generator = torch.Generator().manual_seed(batch * 100 + side)
    sample = torch.randn(batch, unet.config.in_channels, side, side, generator=generator)
    context = torch.randn(batch, 77, unet.config.cross_attention_dim, generator=generator)
    return sample, timestep, context


def test_traced_calls_equal_eager_ones_for_every_signature(model):
    unet = model.pipeline.unet
    traced = TracedUNet(unet)
    cases = [(2, 8, torch.tensor(999)), (2, 8, torch.tensor(17)), (1, 8, torch.tensor(500)),
             (2, 16, torch.tensor(250.5)), (2, 16, torch.tensor(3.25)),
             (2, 12, torch.tensor(42.0, dtype=torch.float64))]
    with torch.inference_mode():
        for batch, side, timestep in cases:
            sample, timestep, context = inputs(unet, batch, side, timestep)
            eager = unet(sample, timestep, encoder_hidden_states=context, return_dict=False)[0]
            replayed = traced(sample, timestep, encoder_hidden_states=context, return_dict=False)[0]
            assert torch.equal(eager, replayed), (batch, side, timestep)
    # One trace per shape and dtype signature; the second timestep of a signature reuses its trace.
    assert len(traced._traces) == 4


def test_calls_a_trace_cannot_stand_for_run_eagerly(model, monkeypatch):
    unet = model.pipeline.unet
    traced = TracedUNet(unet)
    sample, timestep, context = inputs(unet, 2, 8, torch.tensor(10))
    with torch.inference_mode():
        output = traced(sample, timestep, encoder_hidden_states=context)  # return_dict=True: diffusers' output class
        assert torch.equal(output.sample, unet(sample, timestep, encoder_hidden_states=context).sample)
        traced(sample, timestep, encoder_hidden_states=context, cross_attention_kwargs={"scale": 1.0},
               return_dict=False)
        traced(sample, 10, encoder_hidden_states=context, return_dict=False)  # a Python number, not a tensor
    with torch.no_grad():  # not inference mode: autograd's bookkeeping is not what a trace recorded
        traced(sample, timestep, encoder_hidden_states=context, return_dict=False)
    assert traced._traces == {}

    def broken(*args, **kwargs):
        raise RuntimeError("the tracer cannot follow this model")

    monkeypatch.setattr(seedlab.engine.tracing.torch.jit, "trace", broken)
    with torch.inference_mode():
        result = traced(sample, timestep, encoder_hidden_states=context, return_dict=False)[0]
        assert torch.equal(result, unet(sample, timestep, encoder_hidden_states=context, return_dict=False)[0])
    assert traced._failed and traced.config is unet.config


def test_generation_replays_traces_with_the_pixels_of_eager_calls_and_leaves_the_pipeline_as_loaded(model):
    eager = dataclasses.replace(model, traced=False, _lane_copies=[], _traced_unet=None)
    recipes = [Recipe(prompt="a tree", seed=seed, num_inference_steps=3, width=32, height=32, model="tiny",
                      scheduler=scheduler)
               for seed, scheduler in ((1, "EulerAncestralDiscreteScheduler"), (2, "DDIMScheduler"))]
    for recipe in recipes:
        assert np.array_equal(np.asarray(seedlab.generate(model, recipe).image),
                              np.asarray(seedlab.generate(eager, recipe).image))
    assert model.traced and model._traced_unet._traces  # the traces did run
    assert eager._traced_unet is None
    assert isinstance(model.pipeline.unet, torch.nn.Module)  # plain diffusers calls on it stay plain
    assert model.lane_pipelines(1)[0].unet is model._traced_unet
    assert model.lane_pipelines(1)[0].config["unet"] == model.pipeline.config["unet"]
