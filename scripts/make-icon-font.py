"""Writes crates/kiln-desktop/assets/kiln-icons.ttf: the few icon glyphs the desktop app draws
that neither egui's bundled fonts nor common system fonts have: U+1F5D0 (two overlapping
pages, the copy icon egui_commonmark puts on code blocks) and U+2714 (the heavy check mark it
shows once the code is copied).

The glyphs are drawn here as outlines (a page is a square ring), so the font is the project's
own. Run with fontTools (`pip install fonttools`); the output is committed, so builds and CI
need neither Python nor this script.
"""

import pathlib

from fontTools.fontBuilder import FontBuilder
from fontTools.pens.ttGlyphPen import TTGlyphPen

UPM = 1000
OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/kiln-desktop/assets/kiln-icons.ttf"


def rect(pen, x0, y0, x1, y1, clockwise):
    """A closed rectangle; TrueType fills clockwise outlines and cuts counter-clockwise ones."""
    pts = [(x0, y0), (x0, y1), (x1, y1), (x1, y0)]
    if not clockwise:
        pts.reverse()
    pen.moveTo(pts[0])
    for p in pts[1:]:
        pen.lineTo(p)
    pen.closePath()


def ring(pen, x0, y0, x1, y1, t):
    rect(pen, x0, y0, x1, y1, True)
    rect(pen, x0 + t, y0 + t, x1 - t, y1 - t, False)


def copy_glyph():
    """Two pages: the back one's visible corner (top left) and the front one whole."""
    pen = TTGlyphPen(None)
    t = 70
    # Front page, lower right.
    ring(pen, 300, -20, 820, 560, t)
    # Back page, upper left: only its top and left edges, stopping at the front page.
    rect(pen, 120, 160, 120 + t, 740, True)  # left edge
    rect(pen, 120, 740 - t, 640, 740, True)  # top edge
    rect(pen, 120, 160, 300, 160 + t, True)  # bottom edge up to the front page
    rect(pen, 640 - t, 560, 640, 740, True)  # right edge down to the front page
    return pen.glyph()


def check_glyph():
    """A heavy check mark: one clockwise outline, short stroke down-right, long stroke up-right."""
    pen = TTGlyphPen(None)
    pts = [(80, 330), (330, 40), (860, 640), (740, 740), (330, 250), (190, 420)]
    pen.moveTo(pts[0])
    for p in pts[1:]:
        pen.lineTo(p)
    pen.closePath()
    return pen.glyph()


def empty():
    return TTGlyphPen(None).glyph()


def main():
    fb = FontBuilder(UPM, isTTF=True)
    names = [".notdef", "copy", "check"]
    fb.setupGlyphOrder(names)
    fb.setupCharacterMap({0x1F5D0: "copy", 0x2714: "check"})
    fb.setupGlyf({".notdef": empty(), "copy": copy_glyph(), "check": check_glyph()})
    fb.setupHorizontalMetrics({".notdef": (500, 0), "copy": (940, 120), "check": (940, 80)})
    fb.setupHorizontalHeader(ascent=800, descent=-200)
    fb.setupNameTable({"familyName": "Kiln Icons", "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    fb.setupPost()
    fb.save(str(OUT))
    print(f"{OUT}: {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
