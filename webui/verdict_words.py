"""What the page says of a regeneration and of a dropped file, in the visitor's language (issue 54, item 7).

A verdict (seedlab/serving/reproduction.py `Verdict.summary`) and a dropped file's notes (webui/reproduction.py) are
built from a few fixed sentences around measured numbers and named settings. Each fixed sentence has its Chinese
here, as a pattern whose groups carry the numbers and names over; what no pattern knows (one tool's note on one of
its fields, a cause naming a setting) stays as written, so a Chinese verdict never loses a fact to translation. The
public API's verdict stays English: it is data for scripts; only the text the page shows is translated.
"""

from __future__ import annotations

import re

from webui.i18n import ZH_CN

# English pattern -> Chinese, applied in order to the whole text (each may match anywhere, any number of times).
SENTENCES = (
    # Verdict.summary
    (r"Exact match: the regenerated image is identical to the original \(pixel for pixel\)",
     "完全一致：重新生成的图像与原图相同（逐像素一致）"),
    (r"Exact match: the regenerated image is identical to the original \(same pixel fingerprint\)",
     "完全一致：重新生成的图像与原图相同（像素指纹相同）"),
    (r"; the environment differs: ", "；运行环境不同："),
    (r" Both were made under the universal CPU baseline, so this image is exact on any machine: x86-64 CPUs of every "
     r"vendor and instruction set, ARM, any thread count \(with the same torch and diffusers\)\.",
     " 两者都在通用 CPU 基线下生成，因此这张图像在任何机器上都精确一致：任何厂商与指令集的 x86-64 CPU、ARM、任意线程数"
     "（torch 与 diffusers 版本相同时）。"),
    (r"Compared with a lossy original \(JPEG or WebP\): max difference (\d+) levels, (\d+) pixels differ\. A lossy "
     r"file never keeps the exact pixels, so this measures closeness; it is not a mismatch\.",
     r"与有损原图（JPEG 或 WebP）比较：最大差异 \1 级，\2 个像素不同。有损文件从不保留精确的像素，因此这衡量的是"
     r"接近程度，并非不一致。"),
    (r"Regenerated, but there is no original fingerprint or image to compare it with\.",
     "已重新生成，但没有原图的指纹或图像可供比较。"),
    (r"Differs from the original: ", "与原图不同："),
    (r"max difference (\d+) levels, (\d+) pixels differ", r"最大差异 \1 级，\2 个像素不同"),
    (r" \(within (\d+) levels at every pixel: the same image to the eye\)",
     r"（每个像素相差不超过 \1 级：肉眼看是同一张图像）"),
    (r" \(a different image: (\S+) of the pixels are more than (\d+) levels off\)",
     r"（不同的图像：\1 的像素相差超过 \2 级）"),
    (r" \(close: (\S+) of the pixels are more than (\d+) levels off\)", r"（接近：\1 的像素相差超过 \2 级）"),
    (r"the image size differs", "图像尺寸不同"),
    (r"the fingerprint differs; the original pixels are not here to measure by how much",
     "指纹不同；此处没有原图的像素，无法衡量相差多少"),
    (r" Known causes: ", " 已知原因："),
    (r" Environment: ", " 运行环境："),
    (r" Not recorded by the original: ", " 原图未记录："),
    (r" Nothing the original records differs, but it does not record (.+?), which can change pixels\.",
     r" 原图记录的内容都相同，但它没有记录 \1，而这可能改变像素。"),
    (r" Every part of the environment is the same as the original's, so its recipe or its model differs: a link "
     r"altered or mis-copied, or a model folder whose weights changed\.",
     " 运行环境的每一部分都与原图相同，因此是配方或模型不同：链接被修改或复制有误，或模型文件夹中的权重已改变。"),
    # The reproduction panel's own words (webui/reproduction.py)
    (r"Regenerating the linked image…", "正在重新生成链接中的图像…"),
    (r"Regenerating the dropped image…", "正在重新生成拖入的图像…"),
    (r"Stopped before the image was regenerated\.", "在图像重新生成之前已停止。"),
    (r"^Not regenerated: ", "未重新生成："),
    (r"Served from this server's record of the image it made: not regenerated now\. ",
     "来自此服务器对其所生成图像的记录：此次未重新生成。"),
    (r"Exact match: the image kept here has the link's pixel fingerprint",
     "完全一致：此处保存的图像与链接的像素指纹相同"),
    (r"Exact match: the image kept here has the file's pixel fingerprint",
     "完全一致：此处保存的图像与文件的像素指纹相同"),
    (r" \(press \"([^\"]+)\" to make it again and compare\)\.",
     lambda m: f"（按“{ZH_CN.get(m[1], m[1])}”重新生成并比较）。"),
    (r"^This link cannot be opened\. ", "无法打开此链接。"),
    (r" \(It is in the box above: fix it there and press \"Regenerate the link and compare\"\.\)",
     "（链接在上方的框中：请在那里修改，然后按“重新生成链接并比较”。）"),
    (r"The link holds a recipe \(seed (\d+)\) but no pixel fingerprint, so there is no image to compare with: it is in "
     r"the controls, and Generate makes it\.",
     r"该链接包含配方（种子 \1）但没有像素指纹，因此没有可比较的图像：配方已填入控件，按“生成网格”即可生成。"),
    # A dropped file's notes
    (r"Restored from the (PNG|JPEG|WebP|image) \(seed (\d+)\)\.", r"已从该 \1 恢复（种子 \2）。"),
    (r" (\d+) of its settings cannot be run as written \(listed first\): the image will differ\.",
     r" 其中 \1 项设置无法按原样运行（列在最前）：图像会有所不同。"),
    (r" It runs as written, so the regenerated image should match it where the environment does\.",
     " 它可以按原样运行，因此在运行环境相同之处，重新生成的图像应与之一致。"),
    (r"- everything in the (PNG|JPEG|WebP|image) was restored", r"- 该 \1 中的所有内容都已恢复"),
    (r" This server cannot run it as it is: ", " 此服务器无法按原样运行它："),
    (r" Only its own tool can make this image, so there is nothing to compare: Generate makes its recipe with this "
     r"server's model\.",
     " 只有它自己的工具才能生成这张图像，因此没有可比较的内容：“生成网格”会用此服务器的模型生成它的配方。"),
    (r"^Nothing was restored from this (PNG|JPEG|WebP|image): ", r"未能从此 \1 恢复任何内容："),
    (r"^This (PNG|JPEG|WebP|image) cannot be read: ", r"无法读取此 \1："),
    (r"The controls were reset to the page's defaults\.", "控件已重置为页面的默认值。"),
    (r", not the original image\. Press Generate to make it\.", "，并非原图。按“生成网格”即可生成。"),
    (r"^In the controls: ", "已填入控件："),
    # The commonest endings of the readers' notes on other tools' fields (seedlab/files): the field and its value
    # stay in the tool's own words before them.
    (r" (?:has|have) no SeedLab equivalent and (?:is|are) ignored", " 在 SeedLab 中没有对应设置，已忽略"),
    (r" could not be read \(([^()\n]*)\): it is left at its default", r" 无法读取（\1）：保留默认值"),
    (r" is not applied: the image differs", " 未被应用：图像会不同"),
    (r" \(an A1111 setting\)", "（A1111 的设置）"),
    (r"the file does not say where its noise came from \(no RNG field\): A1111 draws it on the GPU by default, so "
     r"rng cuda-philox \(that noise, computed on any machine\) is used; choose rng cpu if the file was made with "
     r"A1111's RNG setting CPU or on a Mac",
     "文件没有写明噪声的来源（无 RNG 字段）：A1111 默认在 GPU 上生成噪声，因此使用 rng cuda-philox（即该噪声，"
     "可在任何机器上计算）；若文件是以 A1111 的 RNG 设置 CPU 或在 Mac 上生成的，请选择 rng cpu"),
    (r" is not applied: (\S+) runs with its default sigmas", r" 未被应用：\1 使用其默认的 sigma"),
    (r" made the image from another image \(img2img\): only the settings are restored",
     "由另一张图像生成（img2img）：只恢复了设置"),
)
_COMPILED = tuple((re.compile(pattern, re.MULTILINE), chinese) for pattern, chinese in SENTENCES)


def said(text: str, lang: str) -> str:
    """`text` (a verdict, a note on a dropped file) in `lang`: its fixed sentences in Chinese for "zh-CN", the rest as
    written; unchanged for any other language."""
    if lang != "zh-CN" or not text:
        return text
    for pattern, chinese in _COMPILED:
        text = pattern.sub(chinese, text)
    return text


def spoken(update: dict, lang: str) -> dict:
    """A handler's update with the texts the page reads as sentences (the verdict line, a file's notes) in `lang`."""
    return {key: said(value, lang) if key in ("verdict_text", "png_notes") and isinstance(value, str) else value
            for key, value in update.items()}
