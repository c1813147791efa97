"""The page's words in each language: English as the page writes it, Simplified Chinese for a zh-CN browser.

The keys are the English texts themselves, as gettext's msgids are: Gradio's front end shows a key it has no
translation for as it is, so an English (or any other) browser reads the page exactly as it was written, and a text
with no Chinese yet stays English instead of showing a key's name. Gradio picks the language from the browser
(`navigator.language`) for what it draws; refusals are made on the server, so `refusal` translates them by the
request's Accept-Language (the same setting, sent with every request).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import gradio as gr

from seedlab.engine.previews import PREVIEW_STEPS
from seedlab.engine.recipe import SPECS
from webui.entries import MAX_CELLS, MAX_ENTRIES

# The recipe's fields (seedlab/engine/recipe.py SPECS): label, then help where it has Chinese.
FIELD_WORDS = {
    "prompt": ("提示词", None),  # the page's prompt box has its own hint
    "seed": ("种子", None),  # the page has a seeds box instead (its label names the field in refusals)
    "negative_prompt": ("反向提示词", "图像中不应出现的内容"),
    "model": ("模型", None),
    "scheduler": ("调度器", "A1111 的采样器之一（DPM++ 2M、Euler a 等：按 A1111 的方式运行），"
                              "或与模型兼容的 diffusers 调度器"),
    "num_inference_steps": ("步数", "去噪步数"),
    "guidance_scale": ("引导系数", "遵循提示词的程度"),
    "width": ("宽度", "图像宽度（像素）"),
    "height": ("高度", "图像高度（像素）"),
    "rng": ("随机数来源",
        "噪声的来源：cpu（可移植，即普通 diffusers）、device（GPU 自身的）、"
        "numpy-pcg64（昇腾上的 mindone.diffusers）、cuda-philox（在任何机器上复现 CUDA GPU 的噪声，即 A1111 的 NV）、"
        "numpy-mt19937（Apple 的 Core ML 管线、Mochi Diffusion；种子最大 4294967295）、std-libstdc++ / std-libc++ / "
        "std-msvc（在 Linux / macOS / Windows 上构建的 stable-diffusion.cpp 的 std_default）"),
    "variation_seed": ("变体种子", "混入其噪声的第二个种子（A1111 的变体种子）"),
    "variation_strength": ("变体强度", "0 完全保留该种子自身的噪声，1 则为变体种子的噪声"),
    "seed_resize_from": ("种子尺寸来源", "绘制噪声时的 宽x高，使种子在其他尺寸下保持构图（留空：关闭）"),
    "deterministic": ("完全确定性", "本次生成使用确定性算子（在 GPU 上更慢）"),
    "dtype": ("数据类型", "权重的精度"),
    "prompt_syntax": ("提示词语法",
        "plain：按原文读取；a1111：(word:1.2)、[word]、BREAK 及分块的长提示词，与 A1111 的读法相同；comfyui："
        "(word:1.2) 与 embedding:NAME，与 ComfyUI 的加权相同；novelai：花括号与 [word]，按 NovelAI 的 1.05（SD 1.x、"
        "2.x）"),
    "emphasis": ("强调模式",
        "A1111 的强调模式：Original 保持均值，No norm 不保持，None 忽略权重"),
    "clip_skip": ("CLIP 跳过层",
        "A1111 的 Clip skip，即 ComfyUI 的 CLIPSetLastLayer -N：文本编码器从末尾数的层（1：最后一层）"),
    "schedule": ("调度类型",
        "A1111 采样器的噪声调度（Automatic：采样器自身的），或 ComfyUI 采样器的调度（normal、karras 等）"),
    "eta": ("Eta", "祖先采样器和 SDE 采样器每步加回的噪声量（A1111 默认 1）"),
    "eta_noise_seed_delta": ("ENSD",
        "A1111 的 eta 噪声种子偏移：祖先噪声取自 种子 + ENSD（NovelAI 式设置中为 31337；0：关闭）"),
    "s_churn": ("Sigma churn", "Euler、Heun、DPM2 每步额外加入的噪声"),
    "s_tmin": ("Sigma tmin", "仅在不低于此值的 sigma 处加入 churn"),
    "s_tmax": ("Sigma tmax", "仅在不高于此值的 sigma 处加入 churn（0：任意）"),
    "s_noise": ("Sigma noise", "churn 噪声的比例"),
    "schedule_sigma_min": ("调度最小 sigma", "调度的最低 sigma（0：模型自身的）"),
    "schedule_sigma_max": ("调度最大 sigma", "调度的最高 sigma（0：模型自身的）"),
    "schedule_rho": ("调度 rho",
        "Karras / Polyexponential 的 rho（0：调度自身的，7 与 1）"),
    "hires_scale": ("高清放大倍数", "高清修复：按此倍数放大潜变量并再次去噪（0：关闭）"),
    "hires_upscaler": ("高清放大器", "潜变量的放大方式（A1111 的潜变量放大器）"),
    "hires_steps": ("高清步数", "第二遍的步数（0：同步数）"),
    "denoising_strength": ("重绘幅度", "第二遍对放大后图像的改变程度"),
    "hires_sampler": ("高清采样器", "第二遍使用的 A1111 采样器（留空：相同）"),
    "hires_schedule": ("高清调度类型", "第二遍的调度（留空：相同）"),
    "hires_cfg": ("高清 CFG 系数",
        "第二遍的引导系数（0：相同；即 Forge 的 Hires CFG Scale）"),
    "hires_seed": ("高清种子",
        "第二遍噪声的种子（-1：同种子；ComfyUI 图中的第二个 KSampler 可有自己的种子）"),
    "loras": ("LoRA", None),
    "lora_hashes": ("LoRA 哈希", None),
    "ti_hashes": ("嵌入哈希", None),
    "start_step": ("起始步",
        "ComfyUI 采样器：从调度的这一步开始，噪声处于该步的水平（KSamplerAdvanced 的 start_at_step；0：第一步）"),
    "end_step": ("结束步",
        "ComfyUI 采样器：在这一步后停止并在此完全去噪（KSamplerAdvanced 的 end_at_step，不留剩余噪声；0：最后一步）"),
    "model_hash": ("模型哈希", None),
    "vae": ("VAE",
        "模型文件夹中（VAE/ 或 vae/）按文件名 NAME.safetensors 指定的 VAE，代替检查点自带的 VAE 解码图像（留空："
        "检查点自带的）"),
    "vae_hash": ("VAE 哈希", None),
    "to_8bit": ("8 位转换",
        "解码后的图像如何变为 8 位像素：round（diffusers 的 numpy_to_pil）或 truncate（A1111 与 ComfyUI：255 * x，"
        "astype(uint8)）；两者最多相差 1 级"),
    "comfyui_noise": ("ComfyUI 噪声",
        "ComfyUI 祖先采样器取噪声的生成器：以 种子 + 1 为种子（ComfyUI PR 11528 之后）或以种子本身（之前）"),
    "preview_steps": ("预览步数", None),  # the page gives it its own hint
    "eta_ddim": ("Eta DDIM",
        "A1111 自带的 DDIM（DDIM (A1111)、DDIM CFG++ (A1111)）每步加回的噪声：A1111 的 Eta DDIM 设置（默认 0）"),
}

# The History panel's note, written here so that its English key and its Chinese give the same limits.
HISTORY_NOTE = ("Every grid (previews and their finishing too), variation set, matrix, nudge set, plot and seed travel "
                "made in this browser, newest first, each with where it came from. Click one to see it again without "
                f"regenerating. Kept in this browser (the last {MAX_ENTRIES} entries, {MAX_CELLS} images at most).")

# The page's own words: labels, hints, buttons, accordion titles and notes, by their English text.
PAGE_WORDS = {
    "Ctrl+Enter generates": "Ctrl+Enter 生成",
    "Ctrl+Enter generates; read with A1111's syntax: (word:1.2), [word], BREAK (Prompt syntax)":
        "Ctrl+Enter 生成；按 A1111 的语法读取：(word:1.2)、[word]、BREAK（提示词语法）",
    "this model is unconditional: leave it empty (Ctrl+Enter generates)":
        "此模型为无条件模型：请留空（Ctrl+Enter 生成）",
    "Seeds": "种子",
    "the models this server offers": "此服务器提供的模型",
    "the model this server runs": "此服务器运行的模型",
    '"42", "0-7" or "3, 17, 99" (-1: a random seed)': '"42"、"0-7" 或 "3, 17, 99"（-1：随机种子）',
    "Random seeds to draw": "随机种子个数",
    "Random": "随机",
    "Generate grid": "生成网格",
    "Generating…": "生成中…",
    "Preview": "预览",
    f"Preview: each seed in this many steps, to finish later (0 picks {PREVIEW_STEPS})":
        f"预览：每个种子走这么多步，之后再补完（0 表示 {PREVIEW_STEPS} 步）",
    "Stop": "停止",
    "Prompt syntax, emphasis and clip skip": "提示词语法、强调与 CLIP 跳过层",
    "Hires fix (A1111 and ComfyUI samplers)": "高清修复（A1111 与 ComfyUI 采样器）",
    "Sampler settings (A1111 and ComfyUI samplers)": "采样器设置（A1111 与 ComfyUI 采样器）",
    "LoRA, embeddings and VAE": "LoRA、嵌入与 VAE",
    "Seed variation, resize and more": "种子变体、尺寸调整及更多",
    "Determinism": "确定性",
    "Environment": "运行环境",
    "Grid": "网格",
    "Anchor": "锚点",
    "Anchor's recipe and link": "锚点的配方和链接",
    "Pixel fingerprint": "像素指纹",
    "Recipe": "配方",
    "Link to this image": "此图像的链接",
    "Variations (one per line)": "变体（每行一个）",
    "Regenerate variations from anchor": "从锚点重新生成变体",
    "Variations": "变体",
    "Link to the selected variation": "所选变体的链接",
    "Results (JSON)": "结果（JSON）",
    "Grid results": "网格结果",
    "Variation results": "变体结果",
    "Selected image": "所选图像",
    "Download PNG": "下载 PNG",
    "Make anchor": "设为锚点",
    "Reuse seed": "复用种子",
    "Finish": "补完",
    "Finish all previews": "补完全部预览",
    "Parameters (AUTOMATIC1111 format)": "参数（AUTOMATIC1111 格式）",
    "Nudge the anchor (variation seeds)": "微调锚点（变体种子）",
    "Nudges": "微调",
    "Variation strength (0 to 1)": "变体强度（0 到 1）",
    "Nudge": "微调",
    "Nudge results (JSON)": "微调结果（JSON）",
    "Compare (X/Y/Z plot over any recipe field)": "对比（任意配方字段的 X/Y/Z 图）",
    "Make the plot": "生成对比图",
    "Plot": "对比图",
    "Plot results (JSON)": "对比图结果（JSON）",
    "Seed travel": "种子漫游",
    "Seeds to travel through": "途经的种子",
    "Frames per segment": "每段帧数",
    "Curve": "曲线",
    "Travel": "漫游",
    "Animation": "动画",
    "Frames": "帧",
    "Travel results (JSON)": "漫游结果（JSON）",
    "Seeds x variations (matrix)": "种子 x 变体（矩阵）",
    "Make the matrix": "生成矩阵",
    "Download sheet (PNG)": "下载拼图（PNG）",
    "Matrix": "矩阵",
    "Matrix results (JSON)": "矩阵结果（JSON）",
    "History": "历史",
    "History entry": "历史条目",
    "Pictures": "图片",
    "Regenerate this entry": "重新生成此条目",
    "Export history (JSON)": "导出历史（JSON）",
    "Import history (JSON)": "导入历史（JSON）",
    "History entry results (JSON)": "历史条目结果（JSON）",
    "Reproduce a link, a recipe or an image": "复现链接、配方或图像",
    "Link or recipe (JSON)": "链接或配方（JSON）",
    "Regenerate the link and compare": "重新生成链接并比较",
    "Re-verify by regenerating": "重新生成以再次验证",
    "Drop an image made by SeedLab or another tool (PNG, JPEG, WebP)":
        "拖入由 SeedLab 或其他工具生成的图像（PNG、JPEG、WebP）",
    "What the image restored": "图像恢复了什么",
    "Regenerate the dropped image and compare": "重新生成拖入的图像并比较",
    "Use the nearest runnable recipe": "使用最接近的可运行配方",
    "Verdict": "结论",
    # The notes at the top of the page and its panels (Markdown: the Chinese keeps the English's marks).
    "# SeedLab\nPick seeds, make a grid, click the cell you like, then vary its prompt.":
        "# SeedLab\n选择种子，生成网格，点击你喜欢的格子，然后改写它的提示词。",
    "Keeps the anchor's recipe and blends in fresh random variation seeds: at a low strength the composition stays "
    "and details move. Click a cell, then *Make anchor* to go on from it.":
        "保留锚点的配方，并混入新的随机变体种子：强度较低时构图不变、细节变化。"
        "点击一个格子，再点 *设为锚点* 即可从它继续。",
    "Frames from each seed to the next: frame k is the first seed with the next one as its variation seed at a "
    "rising strength, so the first frame is the seed's own image and the last the next seed's. Every frame is exact "
    "and linkable; the animation is a lossless WebP.":
        "从每个种子到下一个种子的帧：第 k 帧以第一个种子为种子、下一个种子为变体种子，强度逐渐升高，因此第一帧是该种子"
        "自身的图像，最后一帧是下一个种子的图像。每一帧都精确且可链接；动画为无损 WebP。",
    "Rows are the seeds in the seeds box; columns are the base prompt and each line of the variations box, with the "
    "current settings. Every cell is its own exact, linkable image.":
        "行是种子框中的种子；列是基础提示词和变体框中的每一行，使用当前设置。每个格子都是一张精确、可链接的图像。",
    HISTORY_NOTE: "在此浏览器中生成的每个网格（包括预览及其补完）、变体组、矩阵、微调组、对比图和种子漫游，最新的在前，"
                  "并注明来源。点击其中一项即可再次查看而无需重新生成。保存在此浏览器中"
                  f"（最近 {MAX_ENTRIES} 条，最多 {MAX_CELLS} 张图像）。",
}

ZH_CN = {**PAGE_WORDS,
         **{SPECS[name].label: label for name, (label, _) in FIELD_WORDS.items()},
         **{SPECS[name].help: help for name, (_, help) in FIELD_WORDS.items() if help and SPECS[name].help}}
I18N = gr.I18n(**{"zh-CN": ZH_CN})  # launch(i18n=I18N): Gradio sends the table to the browser with the page


def words(text: str) -> str | gr.i18n.I18nData:
    """`text` as a key the browser translates where it has Chinese; the plain text where it has none."""
    return I18N(text) if text in ZH_CN else text


def sent(text: str) -> str:
    """`text` as an update or a page script sets a button's text: the key in the marked form Gradio's front end
    translates (an I18n object is not JSON), so Generate says "生成网格" again after a run in a Chinese browser."""
    return str(words(text))


def language(request: gr.Request | None) -> str:
    """The visitor's language as the page speaks it: "zh-CN" where the browser prefers Chinese, else "en"."""
    headers: Mapping = getattr(request, "headers", None) or {}
    preferred = str(headers.get("accept-language", "")).split(",")[0].strip().lower()
    return "zh-CN" if preferred.startswith("zh") and "tw" not in preferred and "hk" not in preferred else "en"


# The fixed parts of the commonest refusals, English pattern -> Chinese (a field's label is translated apart).
PROBLEMS = (
    (r"must be at most (\d+) on this server, got (.+)", r"在此服务器上最多为 \1，当前为 \2"),
    (r"must be at most (\d+) pixels a side on this server, got (.+)", r"在此服务器上每边最多 \1 像素，当前为 \2"),
    (r"must be at most (\d+) characters, got (\d+)", r"最多 \1 个字符，当前为 \2 个"),
    (r"must be a whole number from (\S+) to (\S+), got (.+)", r"必须是 \1 到 \2 之间的整数，当前为 \3"),
    (r"must be a whole number from (\S+) to (\S+) and a multiple of (\d+), got (.+)",
     r"必须是 \1 到 \2 之间且为 \3 的倍数的整数，当前为 \4"),
    (r"must be a number from (\S+) to (\S+), got (.+)", r"必须是 \1 到 \2 之间的数，当前为 \3"),
    (r"is missing", "不能为空"),
)
MESSAGES = (
    (r"seeds: (.+) is not a seed; use whole numbers from 0 to (\d+), ranges like \"0-7\" and commas, such as "
     r"\"3, 17, 99\"",
     r"种子：\1 不是有效的种子；请使用 0 到 \2 的整数、\"0-7\" 这样的范围或逗号分隔的列表，如 \"3, 17, 99\""),
    (r"seeds must be a number, a range or a list, such as \"42\", \"0-7\" or \"3, 17, 99\"",
     "种子必须是一个数、一个范围或一个列表，如 \"42\"、\"0-7\" 或 \"3, 17, 99\""),
    (r"seeds: the range (\S+) goes backwards; write (\S+)", r"种子：范围 \1 是倒序的；请写成 \2"),
    (r"seeds: at most (\d+) seeds at once, (.+) asks for more", r"种子：一次最多 \1 个种子，\2 超出了"),
    (r"seeds: (\S+) is out of range; seeds are whole numbers from 0 to (\d+)",
     r"种子：\1 超出范围；种子是 0 到 \2 的整数"),
    (r"Random seeds to draw must be a whole number from 1 to (\d+), got (.+)",
     r"随机种子个数必须是 1 到 \1 之间的整数，当前为 \2"),
    (r"seeds: this server makes at most (\d+) images per grid, got (\d+)",
     r"种子：此服务器每个网格最多生成 \1 张图像，当前为 \2"),
    (r"variations: this server makes at most (\d+) variations per request, got (\d+)",
     r"变体：此服务器每次请求最多生成 \1 个变体，当前为 \2"),
    (r"Pick an anchor first: click a cell of the grid", "请先选择锚点：点击网格中的一个格子"),
    # The server's budget (seedlab/serving/budget.py)
    (r"this request would take about (.+) here; one request may take at most (.+) on this server: ask for fewer "
     r"images, fewer steps or a smaller size",
     r"此请求在这里约需 \1；此服务器上每个请求最多 \2：请减少图像数、步数或尺寸"),
    (r"you have used about (.+) of generation time in the last (\d+) minutes; each visitor may use (.+): wait a few "
     r"minutes or ask for less",
     r"最近 \2 分钟内你已使用约 \1 的生成时间；每位访客最多可用 \3：请等几分钟，或减少请求"),
)


def problem_text(problem: str, lang: str) -> str:
    """One field's problem ("must be at most 50 on this server, got 80") in `lang`; as it is where no pattern fits."""
    if lang == "zh-CN" and (ours := re.fullmatch(r"(.+) \(this server: at most (\d+)\)", problem)):
        return f"{problem_text(ours[1], lang)}（此服务器最多为 {ours[2]}）"  # the spec's range, then this server's
    if lang == "zh-CN":
        for pattern, chinese in PROBLEMS:
            if re.fullmatch(pattern, problem):
                return re.sub(pattern, chinese, problem)
    return problem


def field_label(field: str, lang: str) -> str:
    """A recipe field as the page labels it in `lang`."""
    label = SPECS[field].label if field in SPECS else field
    return ZH_CN.get(label, label) if lang == "zh-CN" else label


# Parts of the refusals that list several problems at once (a link's keys, a plot's axes), English pattern ->
# Chinese, each applied wherever it occurs; what none knows stays as written.
FRAGMENTS = (
    (r"^link: ", "链接："),
    (r"v=(\d+) is a link format this server does not read; it reads v=(\d+)",
     r"v=\1 是此服务器不读取的链接格式；它读取 v=\2"),
    (r"v is missing \(the link format version; this server reads v=(\d+)\)",
     r"缺少 v（链接格式版本；此服务器读取 v=\1）"),
    (r"\b([a-z_]+(?:, [a-z_]+)*) (?:is|are) missing(?=;|$)", r"缺少 \1"),
    (r"a link needs ([a-z_]+(?:, [a-z_]+)*)", r"链接需要 \1"),
    (r"\bseed must be a whole number from (\S+) to (\S+), got ([^;]+)", r"种子必须是 \1 到 \2 之间的整数，当前为 \3"),
    (r"\b([XYZ]) axis: ", r"\1 轴："),
    (r"('[^'\n]*') is not an axis; did you mean ([^?]+)\?",
     lambda m: f"{m[1]} 不是可用的轴；是否要用 {m[2].replace(' or ', ' 或 ')}？"),
    (r"('[^'\n]*') is not an axis; use one of A1111's labels \(([^)]*)\) or a recipe field's name \(such as "
     r"guidance_scale\)", r"\1 不是可用的轴；请使用 A1111 的标签之一（\2）或配方字段名（如 guidance_scale）"),
    (r"; ", "；"),  # between the problems, once each is in Chinese
)


def message_text(message: str, lang: str) -> str:
    """A whole refusal that names no recipe field (a bad seeds box) in `lang`; as it is where no pattern fits."""
    if lang == "zh-CN":
        for pattern, chinese in MESSAGES:
            if re.fullmatch(pattern, message):
                return re.sub(pattern, chinese, message)
        for pattern, chinese in FRAGMENTS:
            message = re.sub(pattern, chinese, message)
    return message


def translated(message: str, request: gr.Request | None) -> str:
    """A refusal the page raises itself ("Pick an anchor first: ...") in the language of the visitor who sent
    `request`."""
    return message_text(message, language(request))
