"""Drawing shared by the public forecast plot and the command line's figure."""

__all__ = ["draw_bands"]


def draw_bands(ax, x, bounds, labels, order):
    """Shade one prediction band per level on ``ax``.

    Parameters
    ----------
    ax : matplotlib Axes
        Where to draw.
    x : array-like of shape (horizon,)
        The forecasts' positions or time stamps.
    bounds : ndarray of shape (horizon, n_levels, 2)
        Lower and upper bounds of each level.
    labels : list of str
        The legend label of each level.
    order : sequence of int
        The levels in drawing order, the widest first: it is drawn the lightest, so
        the narrower bands stay visible over it. A single forecast is drawn as bars.
    """
    for rank, j in enumerate(order):
        lo, hi = bounds[:, j, 0], bounds[:, j, 1]
        if len(x) == 1:
            ax.vlines(x, lo, hi, color="tab:green", lw=4 + 3 * rank,
                      alpha=0.25 + 0.2 * rank, label=labels[j])
        else:
            ax.fill_between(x, lo, hi, color="tab:green", alpha=0.15 + 0.15 * rank, lw=0,
                            label=labels[j])
