"""Text folded to what a reader sees, for matching secrets and secret names.

A hostile or careless writer can hide `password` from a pattern without
hiding it from a person or a program: fullwidth letters (`ｐａｓｓｗｏｒｄ`),
Cyrillic or Greek look-alikes (`раssword` with Cyrillic р and а), a soft
hyphen or zero-width space inside the word, percent-encoding
(`password%3D…`) or HTML character references (`&#112;assword`,
`&quot;password&quot;`). `fold` undoes those, in linear time: HTML
unescaping, then percent-decoding, then dropping Unicode's default-ignorable code points (which render as
nothing), then NFKC (compatibility forms: fullwidth, ligatures, mathematical
letters), then a table of letters that look like Latin ones.

The table holds the common look-alikes of the Latin letters from Cyrillic,
Greek, Armenian and the Latin small capitals (after Unicode's confusables
list, UTS #39), not all of it: folding is for matching, never for display,
and it is defense in depth, not a guarantee.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

__all__ = ["fold", "needs_folding"]

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt): code points
# that render as nothing when a font has no glyph for them.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")

# Look-alikes of Latin letters, by the letter they pass for. Upper and lower
# case are listed apart where they differ in shape (Greek Η looks like H, η like n).
_LOOKALIKES = {
    "a": "аαɑ⍺", "A": "АΑᎪ", "b": "Ьƅ", "B": "ВΒᏴʙ", "c": "сϲᴄ", "C": "СϹᏟ",
    "d": "ԁᑯ", "D": "Ꭰᴅ", "e": "еҽ℮ᴇ", "E": "ЕΕᎬ", "f": "ғ", "g": "ɡց", "G": "Ꮐɢ",
    "h": "һհ", "H": "НΗᎻʜ", "i": "іιıɪ", "I": "ІΙӀ", "j": "јϳ", "J": "ЈᎫᴊ",
    "k": "κᴋ", "K": "КΚᏦ", "l": "ӏⅼ", "L": "Ꮮʟ", "m": "ᴍ", "M": "МΜᎷ", "n": "ոηп", "N": "Νɴ",
    "o": "оοօᴏ", "O": "ОΟՕ", "p": "рρᴘ", "P": "РΡᏢ", "q": "ԛ", "r": "ᴦʀ", "s": "ѕꜱ",
    "S": "ЅᏚ", "t": "τᴛ", "T": "ТΤᎢ", "u": "υսᴜ", "v": "νᴠ", "V": "Ꮩ", "w": "ԝᴡ",
    "W": "Ꮃ", "x": "хχ", "X": "ХΧ", "y": "уγʏ", "Y": "ΥҮ", "z": "ᴢ", "Z": "ΖᏃ",
}
_TABLE = str.maketrans({c: latin for latin, chars in _LOOKALIKES.items() for c in chars if c != latin})
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
#: A character reference as browsers read it: `&#112;`, `&#x70;`, `&quot;` (the `;` may be missing).
_REFERENCE = re.compile(r"&(?:#[0-9]+|#[xX][0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);?")


def needs_folding(text: str) -> bool:
    """Whether `fold` could change the text: any non-ASCII character, a %XX escape or an HTML reference."""
    return (not text.isascii() or ("%" in text and _PERCENT.search(text) is not None)
            or ("&" in text and _REFERENCE.search(text) is not None))


def fold(text: str) -> str:
    """The text as a reader sees it (see the module doc); ASCII without escapes comes back as is."""
    if not needs_folding(text):
        return text
    if "&" in text:
        import html  # its table of named references loads only for text that may hold one

        text = html.unescape(text)
    # Twice at most: `%253D` is `%3D` encoded again; a third layer is not a spelling anyone types.
    for _ in range(2):
        if "%" not in text or _PERCENT.search(text) is None:
            break
        text = unquote(text, errors="replace")
    text = _IGNORABLE.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    return text.translate(_TABLE)
