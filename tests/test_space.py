"""The Hugging Face Space deployment files agree with each other."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def front_matter() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must start with Space front matter between --- lines"
    return yaml.safe_load(match[1])


def pins() -> dict[str, str]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return dict(line.split("==", 1) for line in (raw.split("#")[0].strip() for raw in lines) if "==" in line)


def test_front_matter_names_the_gradio_sdk_pinned_like_requirements():
    meta = front_matter()
    assert meta["sdk"] == "gradio"
    assert str(meta["sdk_version"]) == pins()["gradio"]
    assert (ROOT / meta["app_file"]).is_file() and meta["app_file"] == "app.py"
    assert re.fullmatch(r"3\.\d+", str(meta["python_version"]))
    assert meta["title"] and meta["emoji"] and 0 < len(meta["short_description"]) <= 60


def test_every_runtime_requirement_is_pinned():
    lines = [raw.split("#")[0].strip() for raw in (ROOT / "requirements.txt").read_text().splitlines()]
    requirements = [line for line in lines if line]
    assert requirements and all("==" in line for line in requirements), requirements
    assert pins()["torch"] == "2.13.0"
