"""A reference re-creation (tests only) of how AUTOMATIC1111 stable-diffusion-webui 1.10 applies a LoRA named in a
prompt, for SD 1.x models made of diffusers' UNet2DConditionModel and transformers' CLIPTextModel.

Modelled on A1111 v1.10.1, commit 82a973c04367123ae98bd9abdf80d9eda9b910e2 (brackets: what is re-created):
modules/extra_networks.py (`re_extra_net`, `ExtraNetworkParams`, `parse_prompt(s)`, `lookup_extra_networks`);
extensions-builtin/Lora/extra_networks_lora.py (`ExtraNetworkLora.activate`: multipliers, "Lora hashes");
extensions-builtin/Lora/networks.py (`convert_diffusers_name_to_compvis`, `load_network`, `load_networks`,
`network_apply_weights`); network_lora.py (`ModuleTypeLora`, `NetworkModuleLora.create_module` / `calc_updown`);
lyco_helpers.py (`rebuild_conventional`); network.py (`NetworkModule.finalize_updown` / `calc_scale` / `multiplier`,
`NetworkOnDisk` hash and alias); modules/hashes.py (`addnet_hash_safetensors`); modules/sd_models.py (`model_hash`,
`CheckpointInfo.calculate_shorthash`); modules/shared_init.py (`devices.dtype`).

A1111 renames kohya keys to its CompVis (ldm) module names; for a real SD1 UNet that renaming is one-to-one with
diffusers' module names, so `lora_unet_<diffusers path, dots as _>` is looked up in the diffusers UNet directly and
`lora_te_text_model_<path>` in the CLIPTextModel (transformers 5.x has no `text_model` level: it is added back).
The writers follow kohya-ss/sd-scripts networks/lora.py (`LoRANetwork.create_modules`: target classes and names).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

A1111_COMMIT = "82a973c04367123ae98bd9abdf80d9eda9b910e2"  # v1.10.1
RE_EXTRA_NET = re.compile(r"<(\w+):([^>]+)>")  # modules/extra_networks.py
LORA_TAGS = ("lora", "lyco")  # lora_script.py: register_extra_network_alias(extra_network_lora, "lyco")
REMOVE_SYMBOLS = str.maketrans("", "", ":,")  # ExtraNetworkLora.remove_symbols
# kohya-ss/sd-scripts networks/lora.py LoRANetwork
UNET_TARGETS = ("Transformer2DModel",)
UNET_CONV_TARGETS = ("ResnetBlock2D", "Downsample2D", "Upsample2D")  # added when conv_dim is given (LoCon)
TE_TARGETS = ("CLIPAttention", "CLIPSdpaAttention", "CLIPMLP")


# --- prompt ---------------------------------------------------------------------------------------------------
def parse_extra_networks(prompt: str) -> tuple[str, list[tuple[str, float, float]]]:
    """A1111's `parse_prompt` + `ExtraNetworkLora.activate`: the prompt with every `<word:...>` tag replaced by ""
    (unknown tag names too; the text around stays as it is) and the LoRAs as (name, te_multiplier, unet_multiplier).

    te = positional[1] else 1.0, then `te=` overrides; unet = positional[2] else *te* (after the override), then
    `unet=` overrides. A value float() cannot read raises, as it does in A1111, where the exception makes activate
    fail, so no LoRA at all is applied. `lyco` tags join the lora list (see module docstring for the order).
    Only the positive prompt is parsed (modules/processing.py: `parse_extra_network_prompts` calls
    `extra_networks.parse_prompts(self.prompts)`); tags in the negative prompt stay in its text and reach CLIP.
    """
    found: dict[str, list[list[str]]] = defaultdict(list)

    def take(match: re.Match) -> str:
        found[match.group(1)].append(match.group(2).split(":"))
        return ""

    text = RE_EXTRA_NET.sub(take, prompt)
    loras = []
    for tag, items_list in found.items():
        if tag not in LORA_TAGS:
            continue
        for items in items_list:
            positional, named = [], {}
            for item in items:
                parts = item.split("=", 2)
                if len(parts) == 2:
                    named[parts[0]] = parts[1]
                else:
                    positional.append(item)
            te = float(positional[1]) if len(positional) > 1 else 1.0
            te = float(named.get("te", te))
            unet = float(positional[2]) if len(positional) > 2 else te
            unet = float(named.get("unet", unet))
            if len(positional) > 3 or "dyn" in named:
                raise NotImplementedError("dyn (rank cut-off) is not re-created")
            loras.append((positional[0], te, unet))
    return text, loras


# --- hashes -----------------------------------------------------------------------------------------------------
def _sha256(path, offset: int = 0, length: int | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        file.seek(offset)
        for chunk in [file.read(length)] if length is not None else iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def lora_shorthash(path) -> str:
    """NetworkOnDisk.shorthash: `sshs_model_hash` from the header if present, else for .safetensors the kohya
    "addnet" hash (sha256 of everything after the 8-byte length and the JSON header), else sha256 of the file;
    first 12 hex digits."""
    if str(path).lower().endswith(".safetensors"):
        with safe_open(str(path), "pt") as file:
            given = (file.metadata() or {}).get("sshs_model_hash")
        if given:
            return given[:12]
        with open(path, "rb") as file:
            header_length = int.from_bytes(file.read(8), "little")
        return _sha256(path, offset=8 + header_length)[:12]
    return _sha256(path)[:12]


def lora_hashes_infotext(mentioned: list[tuple[str, str | Path]]) -> str:
    """The "Lora hashes" value for the loaded networks, (name as written in the prompt, file) in load order: a dict
    keyed by the name without ':' and ',', so a repeated name appears once."""
    hashes = {name.translate(REMOVE_SYMBOLS): lora_shorthash(path) for name, path in mentioned if name}
    return ", ".join(f"{k}: {v}" for k, v in hashes.items())


def checkpoint_autov2(path) -> str:
    """CheckpointInfo.shorthash ("Model hash" in infotext): sha256 of the whole file, first 10 hex digits."""
    return _sha256(path)[:10]


def checkpoint_old_hash(path) -> str:
    """sd_models.model_hash: sha256 of the 64 KiB at offset 1 MiB (of b"" for a smaller file), first 8 hex."""
    return _sha256(path, offset=0x100000, length=0x10000)[:8]


# --- writing LoRA files -----------------------------------------------------------------------------------------
def _te_path(name: str) -> str:  # kohya names the SD1 text encoder's modules text_model.encoder.layers.N...
    return name if name.startswith("text_model") else ("text_model." + name).rstrip(".")


def kohya_targets(unet, text_encoder, conv: bool = False) -> list[tuple[str, str, torch.nn.Module]]:
    """(kohya key, diffusers/peft key, module) for what kohya's LoRANetwork targets on SD1: every Linear and 1x1
    Conv2d inside the target classes, with conv=True also the 3x3 convs of ResnetBlock2D/Downsample2D/Upsample2D."""
    out = []
    unet_classes = UNET_TARGETS + (UNET_CONV_TARGETS if conv else ())
    for kohya_prefix, peft_prefix, root, classes in (
        ("lora_te", "text_encoder", text_encoder, TE_TARGETS),
        ("lora_unet", "unet", unet, unet_classes),
    ):
        for name, module in root.named_modules():
            if type(module).__name__ not in classes:
                continue
            name = _te_path(name) if kohya_prefix == "lora_te" else name
            for child_name, child in module.named_modules():
                kind = type(child).__name__
                if kind == "Linear" or (kind == "Conv2d" and (child.kernel_size == (1, 1) or conv)):
                    path = f"{name}.{child_name}"
                    out.append((f"{kohya_prefix}.{path}".replace(".", "_"), f"{peft_prefix}.{path}", child))
    return out


def _random_pairs(targets, rank, scale, seed, relative_std):
    """down ~ N(0, 1); up ~ N(0, s^2) with s chosen so that scale * up @ down has a standard deviation of
    relative_std times the module weight's (floor 1e-3); drawn in target order from one seeded CPU generator."""
    generator = torch.Generator().manual_seed(seed)
    for target in targets:
        weight = target[2].weight.detach().float()
        down = torch.randn((rank, *weight.shape[1:]), generator=generator)
        up = torch.randn((weight.shape[0], rank, *([1, 1] if weight.dim() == 4 else [])), generator=generator)
        yield target, down, up * (relative_std * max(float(weight.std()), 1e-3) / (scale * rank**0.5))


def write_kohya_lora(
    path, unet, text_encoder, rank=4, alpha=2.0, seed=0, conv=False, dtype=torch.float16, *, relative_std=0.1
) -> Path:
    """A kohya-layout LoRA: `<key>.lora_down.weight` (rank, in[, kh, kw]), `<key>.lora_up.weight` (out, rank[, 1, 1]),
    `<key>.alpha` (0-dim, in `dtype` like kohya's save), and kohya's ss_* metadata. At multiplier 1 each targeted
    weight moves by about `relative_std` (default 0.1) of its own standard deviation."""
    tensors = {}
    for (key, _, _), down, up in _random_pairs(
        kohya_targets(unet, text_encoder, conv), rank, alpha / rank, seed, relative_std
    ):
        tensors[f"{key}.lora_down.weight"] = down.to(dtype)
        tensors[f"{key}.lora_up.weight"] = up.to(dtype)
        tensors[f"{key}.alpha"] = torch.tensor(alpha, dtype=dtype)
    metadata = {"ss_network_module": "networks.lora", "ss_network_dim": str(rank), "ss_network_alpha": str(alpha)}
    metadata |= {"ss_output_name": Path(path).stem, "ss_base_model_version": "sd_v1", "ss_v2": "False"}
    if conv:
        metadata["ss_network_args"] = json.dumps({"conv_dim": str(rank), "conv_alpha": str(alpha)})
    save_file(tensors, str(path), metadata=metadata)
    return Path(path)


def write_diffusers_lora(
    path, unet, text_encoder, rank=4, alpha=None, seed=0, conv=False, dtype=torch.float16, *, relative_std=0.1
) -> Path:
    """The same kind of LoRA in diffusers/peft layout: `unet.<path>.lora_A.weight` (= lora_down) and `.lora_B.weight`
    (= lora_up), `text_encoder.text_model.<path>...` (diffusers 0.42.1 strips `text_model.` again for a flattened
    CLIPTextModel). Peft layout has no alpha tensors: diffusers reads alpha only from the header's
    `lora_adapter_metadata` JSON ({"unet.r", "unet.lora_alpha", "unet.target_modules", "text_encoder.*"}), which
    is written when `alpha` is given; without it diffusers uses lora_alpha = r, i.e. scale 1.0 (W + B @ A).
    Same seed and arguments as write_kohya_lora (with the same alpha) give the same tensors.
    A1111 1.10 matches none of these keys for SD1 (`partition(".")` leaves "unet" / "text_encoder"), so there
    such a file loads as a network with no modules: no weight changes, yet its hash goes into "Lora hashes"."""
    targets = kohya_targets(unet, text_encoder, conv)
    tensors = {}
    scale = 1.0 if alpha is None else alpha / rank
    for (_, key, _), down, up in _random_pairs(targets, rank, scale, seed, relative_std):
        tensors[f"{key}.lora_A.weight"] = down.to(dtype)
        tensors[f"{key}.lora_B.weight"] = up.to(dtype)
    metadata = {"format": "pt"}
    if alpha is not None:
        config = {}  # what diffusers' own save_lora_weights stores (LoraConfig fields per component prefix)
        for prefix, root in (("unet", unet), ("text_encoder", text_encoder)):
            names = {n for n, _ in root.named_modules()}
            found = [k.split(".", 1)[1] for _, k, _ in targets if k.startswith(prefix + ".")]
            found = [m if m in names else m.removeprefix("text_model.") for m in found]
            config |= {f"{prefix}.r": rank, f"{prefix}.lora_alpha": alpha, f"{prefix}.target_modules": found}
        metadata["lora_adapter_metadata"] = json.dumps(config, indent=2, sort_keys=True)
    save_file(tensors, str(path), metadata=metadata)
    return Path(path)


# --- applying ---------------------------------------------------------------------------------------------------
def apply_a1111_loras(unet, text_encoder, loras, compute_dtype=torch.float32) -> int:
    """Merge LoRAs into the modules' weights in place as A1111 1.10 does; returns how many modules were written.

    loras: (path, te_multiplier, unet_multiplier) in the order A1111 loads them (parse_extra_networks order).
    The same path twice is one Network object in A1111 (`load_networks` re-uses it and overwrites its multipliers),
    so it is applied twice, both times with the last multipliers given for it.
    compute_dtype is A1111's `devices.dtype`: float32 with --no-half (the only way A1111 keeps an SD model in
    float32, e.g. on CPU), else float16; up/down are cast to it and updown is computed in it.
    The weights must be the original ones: A1111 restores its backup before applying a changed set of networks.
    """
    modules = {}
    for prefix, root in (("lora_te", text_encoder), ("lora_unet", unet)):
        for name, module in root.named_modules():
            name = _te_path(name) if prefix == "lora_te" else name
            modules[f"{prefix}_{name}".replace(".", "_").rstrip("_")] = module
    last = {str(path): (te, un) for path, te, un in loras}
    changed = set()
    with torch.no_grad():
        for path, _, _ in loras:
            te_multiplier, unet_multiplier = last[str(path)]
            groups: dict[str, dict[str, torch.Tensor]] = {}
            for key, tensor in load_file(str(path)).items():
                module_key, _, part = key.partition(".")
                if module_key in modules:  # load_network: keys_failed_to_match are dropped
                    groups.setdefault(module_key, {})[part] = tensor
            for module_key, w in groups.items():
                if "lora_up.weight" not in w and "lora_A.weight" in w:  # ModuleTypeLora: renamed, alpha dropped
                    w = {"lora_up.weight": w["lora_B.weight"], "lora_down.weight": w["lora_A.weight"]}
                module = modules[module_key]
                if type(module) not in (torch.nn.Linear, torch.nn.Conv2d):
                    raise AssertionError(f"{module_key}: unsupported {type(module).__name__}")
                up, down = w["lora_up.weight"], w["lora_down.weight"]
                # create_module: Linear -> 2D; Conv2d -> 4D; nn module (float32) then .to(devices.dtype)
                if type(module) is torch.nn.Linear:
                    up, down = up.reshape(up.shape[0], -1), down.reshape(down.shape[0], -1)
                else:
                    down = down.reshape(down.shape[0], -1, 1, 1) if down.dim() == 2 else down
                    up = up.reshape(up.shape[0], -1, 1, 1)
                up, down = (t.to(torch.float32).to(compute_dtype) for t in (up, down))
                weight = module.weight
                # calc_updown + rebuild_conventional
                output_shape = [up.size(0), down.size(1)] + (list(down.shape[2:]) if down.dim() == 4 else [])
                updown = (up.reshape(up.size(0), -1) @ down.reshape(down.size(0), -1)).reshape(output_shape)
                # finalize_updown
                if weight.numel() == updown.numel():
                    updown = updown.reshape(weight.shape)
                alpha = w["alpha"].item() if "alpha" in w else None
                updown = updown * (alpha / down.shape[0] if alpha is not None else 1.0)
                updown = updown * (te_multiplier if module_key.startswith("lora_te_") else unet_multiplier)
                # network_apply_weights
                weight.copy_((weight.to(dtype=updown.dtype) + updown).to(dtype=weight.dtype))
                changed.add(module_key)
    return len(changed)
