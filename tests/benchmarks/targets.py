"""The line every benchmark prints after its table for each of its targets: the ratio (measured
against an anchor in the same run), the target, and a verdict (``ok``, ``BELOW TARGET`` or
``ABOVE TARGET``), as ``bench_serve.py`` prints them::

    ratio steps / tft rb at 1000000 rows: 1.06x (target >= 1.5x) BELOW TARGET
"""

from __future__ import annotations


def check(label: str, ratio: float, target: float, *, at_most: bool = False) -> bool:
    """Print ``label``'s ratio against ``target`` (a floor, or a ceiling with ``at_most``);
    whether it is met."""
    met = ratio <= target if at_most else ratio >= target
    verdict = "ok" if met else "ABOVE TARGET" if at_most else "BELOW TARGET"
    print(f"ratio {label}: {ratio:.2f}x (target {'<=' if at_most else '>='} {target:g}x) "
          f"{verdict}", flush=True)
    return met
