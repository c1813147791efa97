"""Fast checks of tests/reference/a1111_lora.py itself (the A1111 1.10 LoRA reference)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from safetensors import safe_open

from tests.reference.a1111_lora import (
    apply_a1111_loras,
    checkpoint_autov2,
    checkpoint_old_hash,
    kohya_targets,
    lora_hashes_infotext,
    lora_shorthash,
    parse_extra_networks,
    write_diffusers_lora,
    write_kohya_lora,
)
from tests.tiny import tiny_pipeline


@pytest.mark.parametrize(
    ("prompt", "text", "loras"),
    [
        ("a <lora:a:0.5>", "a ", [("a", 0.5, 0.5)]),
        ("<lora:a:0.5:1>", "", [("a", 0.5, 1.0)]),
        ("<lora:a:te=0.3:unet=0.8>", "", [("a", 0.3, 0.8)]),
        ("<lora:a:te=0.3>", "", [("a", 0.3, 0.3)]),  # unet defaults to te after te= is applied
        ("<lora:a:unet=0.8>", "", [("a", 1.0, 0.8)]),
        ("<lora:a:0.5:te=0.2>", "", [("a", 0.2, 0.2)]),
        ("<lora:a>", "", [("a", 1.0, 1.0)]),
        ("red <lora:a:0.5>, blue<lora:b:-1:2> circle", "red , blue circle", [("a", 0.5, 0.5), ("b", -1.0, 2.0)]),
        ("<lyco:b:0.1> x <lora:a:0.2> <lyco:c>", " x  ", [("b", 0.1, 0.1), ("c", 1.0, 1.0), ("a", 0.2, 0.2)]),
        ("x <hypernet:h:1> y <lora:a:1> z", "x  y  z", [("a", 1.0, 1.0)]),
        ("no tags (a:1.2) <not a tag>", "no tags (a:1.2) <not a tag>", []),
    ],
)
def test_parse_extra_networks(prompt, text, loras):
    assert parse_extra_networks(prompt) == (text, loras)


def test_parse_bad_multiplier_raises():
    with pytest.raises(ValueError):
        parse_extra_networks("<lora:a:strong>")


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    return tiny_pipeline(tmp_path_factory.mktemp("tok"))


def _weights(pipe):
    return {key: p.detach().clone() for key, p in _named(pipe)}


def test_hashes_of_written_file(pipe, tmp_path):
    path = write_kohya_lora(tmp_path / "mine.safetensors", pipe.unet, pipe.text_encoder)
    data = path.read_bytes()
    body = data[8 + int.from_bytes(data[:8], "little") :]
    assert lora_shorthash(path) == hashlib.sha256(body).hexdigest()[:12]
    assert checkpoint_autov2(path) == hashlib.sha256(data).hexdigest()[:10]
    assert checkpoint_old_hash(path) == hashlib.sha256(data[0x100000:0x110000]).hexdigest()[:8]
    assert lora_hashes_infotext([("my:lo,ra", path), ("my:lo,ra", path)]) == f"mylora: {lora_shorthash(path)}"
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
        assert {meta["ss_network_dim"], meta["ss_network_alpha"], meta["ss_output_name"]} == {"4", "2.0", "mine"}
        assert any(k.startswith("lora_te_text_model_encoder_layers_0_self_attn_q_proj.") for k in list(f.keys()))


@pytest.mark.parametrize("conv", [False, True])
def test_apply_changes_exactly_the_targets(pipe, tmp_path, conv):
    path = write_kohya_lora(tmp_path / "l.safetensors", pipe.unet, pipe.text_encoder, conv=conv)
    targets = kohya_targets(pipe.unet, pipe.text_encoder, conv)
    ids = {id(m.weight) for _, _, m in targets}
    before = _weights(pipe)
    params = dict(_named(pipe))
    try:
        assert apply_a1111_loras(pipe.unet, pipe.text_encoder, [(path, 0.0, 0.0)]) == len(targets)
        assert all(torch.equal(before[k], p) for k, p in params.items())
        assert apply_a1111_loras(pipe.unet, pipe.text_encoder, [(path, 1.0, 1.0)]) == len(targets)
        for key, p in params.items():
            assert torch.equal(before[key], p) != (id(p) in ids), key
        if conv:
            assert any(m.kernel_size == (3, 3) for _, _, m in targets if isinstance(m, torch.nn.Conv2d))
    finally:
        _restore(params, before)


def _named(pipe):
    for prefix, root in (("te", pipe.text_encoder), ("unet", pipe.unet)):
        for name, p in root.named_parameters():
            yield f"{prefix}.{name}", p


def _restore(params, before):
    with torch.no_grad():
        for key, p in params.items():
            p.copy_(before[key])


def test_float_order_two_networks_and_te_unet_split(pipe, tmp_path):
    a = write_kohya_lora(tmp_path / "a.safetensors", pipe.unet, pipe.text_encoder, seed=1)
    b = write_kohya_lora(tmp_path / "b.safetensors", pipe.unet, pipe.text_encoder, rank=2, alpha=1.0, seed=2)
    params = dict(_named(pipe))
    before = _weights(pipe)
    try:
        apply_a1111_loras(pipe.unet, pipe.text_encoder, [(a, 0.5, 0.0), (b, 0.7, 0.3)])
        q = "te.encoder.layers.0.self_attn.q_proj.weight"
        expected = before[q]
        for path, mult in ((a, 0.5), (b, 0.7)):
            with safe_open(str(path), "pt") as f:
                key = "lora_te_text_model_encoder_layers_0_self_attn_q_proj"
                up, down = (
                    f.get_tensor(f"{key}.lora_up.weight").float(),
                    f.get_tensor(f"{key}.lora_down.weight").float(),
                )
                scale = f.get_tensor(f"{key}.alpha").item() / down.shape[0]
            expected = expected + (up @ down) * scale * mult
        assert torch.equal(params[q], expected)
        key = "unet.down_blocks.1.attentions.0.proj_in.weight"  # unet: only b, at 0.3
        assert not torch.equal(params[key], before[key])
        # the same LoRA named twice: one Network object, applied twice with the last multipliers
        _restore(params, before)
        apply_a1111_loras(pipe.unet, pipe.text_encoder, [(a, 0.5, 0.5), (a, 0.3, 0.3)])
        twice = params[q].clone()
        _restore(params, before)
        apply_a1111_loras(pipe.unet, pipe.text_encoder, [(a, 0.3, 0.3), (a, 0.3, 0.3)])
        assert torch.equal(params[q], twice)
    finally:
        _restore(params, before)


def test_diffusers_layout_is_ignored_by_a1111(pipe, tmp_path):
    path = write_diffusers_lora(tmp_path / "d.safetensors", pipe.unet, pipe.text_encoder, alpha=2.0)
    kohya = write_kohya_lora(tmp_path / "k.safetensors", pipe.unet, pipe.text_encoder)
    with safe_open(str(path), "pt") as d, safe_open(str(kohya), "pt") as k:
        key = "down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q"
        assert torch.equal(
            d.get_tensor(f"unet.{key}.lora_A.weight"),
            k.get_tensor(f"lora_unet_{key.replace('.', '_')}.lora_down.weight"),
        )
        assert "text_encoder.text_model.encoder.layers.0.mlp.fc1.lora_B.weight" in list(d.keys())
        config = json.loads(d.metadata()["lora_adapter_metadata"])
        assert config["unet.lora_alpha"] == 2.0 and "encoder.layers.0.mlp.fc1" in config["text_encoder.target_modules"]
    before = _weights(pipe)
    assert apply_a1111_loras(pipe.unet, pipe.text_encoder, [(path, 1.0, 1.0)]) == 0
    assert all(torch.equal(before[k], p) for k, p in _named(pipe))


def test_lora_changes_the_image(pipe, tmp_path):
    path = write_kohya_lora(tmp_path / "l.safetensors", pipe.unet, pipe.text_encoder)
    params = dict(_named(pipe))
    before = _weights(pipe)

    def image():
        generator = torch.Generator().manual_seed(0)
        return pipe("a red circle", num_inference_steps=3, generator=generator, output_type="np").images[0]

    try:
        plain = image()
        apply_a1111_loras(pipe.unet, pipe.text_encoder, [(path, 1.0, 1.0)])
        changed = image()
    finally:
        _restore(params, before)
    assert abs(changed - plain).mean() > 1e-3
