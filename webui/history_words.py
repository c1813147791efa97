"""What History says of its entries, in the visitor's language (issue 54, item 7).

History's lines and captions are made from an entry's recipes each time they are shown (webui/entries.py), never
stored as text, so they are made in the language of the request that shows them: the English template itself is
the key, as for the page's words (webui/i18n.py), and a template with no Chinese stays English. What a visitor
wrote (a prompt, a variation line) and the numbers are filled in as they are; an exported file stays English, since
it is data for other programs.
"""

from __future__ import annotations

KIND_WORDS = {"grid": "网格", "variations": "变体", "matrix": "矩阵", "nudges": "微调", "plot": "对比图",
              "travel": "漫游"}

ZH_CN = {
    # captions of the cells of a grid, matrix or nudges, and of a restored entry's
    "seed {seed}": "种子 {seed}",
    "variation seed {seed} · strength {strength}": "变体种子 {seed} · 强度 {strength}",
    "seed {seed} · {column}": "种子 {seed} · {column}",
    "base prompt": "基础提示词",
    " · preview": " · 预览",
    # an entry's summary (its thumbnail's caption) and its timeline line
    "previews of {count}": "{count} 张预览",
    "grid of {count}": "{count} 张网格",
    "matrix {rows} x {columns}": "矩阵 {rows} x {columns}",
    "{kind} ({count})": "{kind}（{count}）",
    " (stopped: {count} of {asked})": "（已停止：{asked} 张中的 {count} 张）",
    ", {finished} finished, {previews} still previews": "，{finished} 张已补完，{previews} 张仍为预览",
    "{what}: seeds {seeds} · {prompt}": "{what}：种子 {seeds} · {prompt}",
    "matrix {rows} seeds x {columns} columns · {prompt}": "矩阵 {rows} 个种子 x {columns} 列 · {prompt}",
    "{what} · {prompt}": "{what} · {prompt}",
    " ← anchor seed {seed} from {source}": " ← 锚点种子 {seed}，来自 {source}",
    "an image outside this history": "历史记录之外的图像",
    # notes
    "{count} stored entries could not be read and were left out.": "有 {count} 条已存记录无法读取，已略去。",
    "That entry is no longer in the history.": "该记录已不在历史记录中。",
    "#{id}, {kind} made {made_at}: {shown} of {count} images shown from this server's record, none regenerated.":
        "#{id}，{kind}，生成于 {made_at}：{count} 张图像中有 {shown} 张取自此服务器的记录，均未重新生成。",
    "{missing} are no longer kept here (a restart or pruning drops them), shown grey: \"Regenerate this entry\" "
    "makes them again, and each cell's link regenerates it.":
        "{missing} 张已不在此服务器上（重启或清理会删去它们），以灰色显示：“重新生成此记录”会再次生成它们，"
        "每格的链接也会重新生成该图像。",
    "Its anchor (seed {seed}) is the anchor again.": "它的锚点（种子 {seed}）再次成为锚点。",
    "The controls now hold its recipe.": "控件现已填入它的配方。",
    "This server cannot make some of its recipes: {refused}": "此服务器无法生成其中一些配方：{refused}",
    "Imported {count} entries ({images} images).": "已导入 {count} 条记录（{images} 张图像）。",
    "This file cannot be imported: {error}.": "此文件无法导入：{error}。",
    " (not kept here)": "（此处未保留）",
    "Regenerated {made} of {count} images: {same} identical to the history":
        "已重新生成 {count} 张中的 {made} 张：{same} 张与历史记录一致",
    ", {differ} differ (the history's were made in another environment, or the model changed).":
        "，{differ} 张不同（历史记录中的图像生成于另一运行环境，或模型已改变）。",
    " {count} entries were already in the history and were not added again.": "有 {count} 条已在历史记录中，未再添加。",
    " {count} entries were left out: malformed, over the bounds, or not makeable on this server.":
        "有 {count} 条被略去：格式错误、超出限制，或无法在此服务器上生成。",
    " The history keeps the newest {entries} entries and {images} images: older ones went.":
        "历史记录只保留最新的 {entries} 条记录和 {images} 张图像：较旧的已移除。",
}


def phrase(template: str, lang: str = "en", **values) -> str:
    """`template` with its values filled in, in `lang` ("zh-CN": its Chinese where it has one; else as written)."""
    if lang == "zh-CN":
        template = ZH_CN.get(template, template)
        values = {name: KIND_WORDS.get(value, value) if name == "kind" else value for name, value in values.items()}
    return template.format(**values)
