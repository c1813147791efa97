"""Make the docs' picture of embedded-v2 with SeedLab's own command line, as a user would.

    python docs/make_pictures.py [--out docs/embedded_v2_grid.png]

Row 1: `python -m seedlab grid` of the example prompt, seeds 0-7. Rows 2 and 3: `python -m seedlab vary` of seed 3
with the diffusers guide's variations and embedded-v2's attribute words. Each image is the CLI's own PNG,
shown 2x (nearest), in a folder that is removed afterwards.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "a red star on a blue background"
SEED = 3
VARIATIONS = [", highly realistic", ", artsy", ", colorful", ", trending", ", small", ", large", ", green",
              ", on a yellow background", ", circle", ", triangle", ", square", ", on a white background, artsy",
              ", purple, on a black background"]


def cli(*arguments: str) -> None:
    subprocess.run([sys.executable, "-m", "seedlab", *arguments, "--model", "embedded-v2"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def row(images: list[Path], columns: int) -> np.ndarray:
    cells = [np.asarray(Image.open(path).convert("RGB")) for path in images]
    cells += [np.full_like(cells[0], 255)] * (columns - len(cells))
    return np.concatenate(cells, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "embedded_v2_grid.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        grid, vary = Path(folder) / "grid", Path(folder) / "vary"
        cli("grid", "--prompt", PROMPT, "--seeds", "0-7", "--out", str(grid))
        cli("vary", "--prompt", PROMPT, "--seed", str(SEED), *(f"--variation={v}" for v in VARIATIONS),
            "--out", str(vary))
        grid_images = sorted(grid.glob("*.png"))
        vary_images = sorted(vary.glob("*.png"))
        columns = 7
        rows = [row(grid_images[:columns], columns)]
        rows += [row(vary_images[i:i + columns], columns) for i in range(0, len(vary_images), columns)]
        sheet = Image.fromarray(np.concatenate(rows, axis=0))
        sheet.resize((sheet.width * 2, sheet.height * 2), Image.NEAREST).save(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
