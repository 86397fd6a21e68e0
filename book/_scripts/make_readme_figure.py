"""Draw the README's picture with mzlite.

Run: .venv/bin/python book/_scripts/make_readme_figure.py

Left: a token zonotope with its generators and interval hull (the paper's IHW). Right: the same
zonotope mapped by matrices sampled from a matrix zonotope M_c + sum_l xi_l M_l, inside the
zonotope that over-approximates the whole product set.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from mzlite.viz import plot_zonotope  # noqa: E402
from mzlite.zonotope import MatrixZonotope, Zonotope  # noqa: E402

torch.manual_seed(0)
z = Zonotope(
    torch.zeros(2, dtype=torch.float64),
    torch.tensor([[1.0, 0.2], [0.3, 0.8], [-0.5, 0.5]], dtype=torch.float64),
)
theta = torch.tensor(0.35, dtype=torch.float64)
rot = torch.stack(
    [torch.stack([theta.cos(), -theta.sin()]), torch.stack([theta.sin(), theta.cos()])]
)
mz = MatrixZonotope(
    torch.eye(2, dtype=torch.float64),
    torch.stack(
        [
            rot - torch.eye(2, dtype=torch.float64),
            torch.tensor([[0.25, 0.0], [0.0, -0.2]], dtype=torch.float64),
        ]
    ),
)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.6))
plot_zonotope(z, left, show_interval_hull=True, label="token zonotope")
left.set_title(r"zonotope $\langle c, G\rangle$, generators and interval hull")
plot_zonotope(
    mz @ z,
    right,
    color="0.6",
    alpha=0.15,
    show_generators=False,
    label=r"$\mathcal{M}\mathcal{Z}$ (over-approx.)",
)
for i, M in enumerate(mz.sample(6, seed=1)):
    plot_zonotope(
        M @ z,
        right,
        color=plt.cm.viridis(i / 6),
        alpha=0.15,
        show_generators=False,
        show_center=False,
    )
right.set_title(r"images $M\mathcal{Z}$, $M$ sampled from $\mathcal{M}$")
for ax in (left, right):
    ax.set_aspect("equal")
    ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
out = Path(__file__).resolve().parents[1] / "images" / "hero.png"
fig.savefig(out, dpi=110)
print(f"wrote {out}")
